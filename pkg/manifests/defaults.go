package manifests

import (
	"fmt"
	"sync"

	"github.com/joiner-autoscaler/joiner/config"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"sigs.k8s.io/yaml"
)

// crdDefaults applies the CRDs' defaults to a NodePool, NodeClaim or
// EC2NodeClass document, with the API server's own algorithm, so that an
// object read offline means what it would once applied: a NodePool
// without consolidateAfter consolidates after 0s, not Never (the two
// decode alike), its budgets are 10% of its nodes, and so on. Other kinds
// come back unchanged.
func crdDefaults(kind string, doc []byte) ([]byte, error) {
	schemas, err := loadSchemas()
	if err != nil {
		return nil, err
	}
	s, ok := schemas[kind]
	if !ok {
		return doc, nil
	}
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return nil, err
	}
	// The one required field whose absence decoding hides: an unset
	// consolidateAfter would read as Never.
	if spec, ok := obj["spec"].(map[string]any); ok && kind == "NodePool" {
		if d, ok := spec["disruption"].(map[string]any); ok {
			if _, ok := d["consolidateAfter"]; !ok {
				return nil, fmt.Errorf("NodePool spec.disruption.consolidateAfter: Required value, as the API server would refuse it; set it (0s consolidates at once, Never never)")
			}
		}
	}
	defaulting.Default(obj, s)
	return yaml.Marshal(obj)
}

var loadSchemas = sync.OnceValues(func() (map[string]*structuralschema.Structural, error) {
	out := map[string]*structuralschema.Structural{}
	for _, raw := range [][]byte{config.NodePools, config.NodeClaims, config.EC2NodeClasses} {
		var def apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &def); err != nil {
			return nil, err
		}
		for _, v := range def.Spec.Versions {
			if !v.Storage || v.Schema == nil {
				continue
			}
			var internal apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				return nil, fmt.Errorf("CRD %s: %w", def.Name, err)
			}
			s, err := structuralschema.NewStructural(&internal)
			if err != nil {
				return nil, fmt.Errorf("CRD %s: %w", def.Name, err)
			}
			out[def.Spec.Names.Kind] = s
		}
	}
	return out, nil
})

// withCRDDefaults is doc with its kind's CRD defaults.
func withCRDDefaults(doc []byte) ([]byte, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, fmt.Errorf("reading YAML: %w", err)
	}
	return crdDefaults(head.Kind, doc)
}
