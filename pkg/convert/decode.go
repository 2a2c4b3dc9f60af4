package convert

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Object is one manifest as generic JSON: conversion must carry kinds it
// knows nothing about through unchanged, which typed decoding cannot.
type Object = map[string]any

// Decode reads every YAML or JSON document of r. Lists (`kind: List` from
// `kubectl get -o yaml`, or any *List with items) are flattened into their
// items, so a dump of a cluster converts like the files it came from.
func Decode(name string, r io.Reader) ([]Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []Object
	for index := 0; ; index++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: reading YAML: %w", name, index, err)
		}
		var obj Object
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", name, index, err)
		}
		if len(obj) == 0 { // a comment-only or empty document
			index--
			continue
		}
		if _, ok := obj["kind"].(string); !ok {
			return nil, fmt.Errorf("%s, document %d: no kind: every manifest needs apiVersion and kind", name, index)
		}
		out = append(out, flatten(obj)...)
	}
}

func flatten(obj Object) []Object {
	kind, _ := obj["kind"].(string)
	items, isList := obj["items"].([]any)
	if !strings.HasSuffix(kind, "List") || !isList {
		return []Object{obj}
	}
	var out []Object
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, flatten(m)...)
		}
	}
	return out
}

// serverFields are the metadata the API server sets: applying them back
// fails (resourceVersion) or means nothing (the rest).
var serverFields = []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink"}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// clean drops status and server-set metadata, as `kubectl get -o yaml` output
// carries them.
func clean(obj Object) {
	delete(obj, "status")
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return
	}
	for _, f := range serverFields {
		delete(meta, f)
	}
	if ann, ok := meta["annotations"].(map[string]any); ok {
		delete(ann, lastApplied)
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
}

// Encode writes objects as multi-document YAML, the form `kubectl apply -f`
// and `joiner plan -f` read.
func Encode(w io.Writer, objs []Object) error {
	var buf bytes.Buffer
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
