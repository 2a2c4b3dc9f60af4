// Command crdgen regenerates deepcopy functions and CRDs for Joiner's APIs with
// controller-gen, then applies the few schema details that controller-gen
// markers cannot express:
//
//   - taints are core/v1 types, so their key/value patterns and effect enum
//     must be added after generation;
//   - NodePool and NodeClaim share the requirement type, but only a NodePool
//     may not name karpenter.sh/nodepool in its requirements;
//   - label values in a NodePool template are map values, which have no
//     marker for pattern and length; so are the kubelet's reserved resources
//     and eviction thresholds in an EC2NodeClass;
//   - a NodeClaim's conditions are Karpenter's own condition type, looser than
//     metav1.Condition: only type, status and lastTransitionTime are
//     required, and the reason may be empty;
//   - Karpenter puts the label-value pattern and length of requirement values
//     on the list itself, where the apiserver never applies them (they are
//     string validations, and the list is no string). Karpenter therefore
//     accepts any value, and so must we to answer as it does; controller-gen
//     refuses those keywords on a list, so they are set here.
//
// With -verify it generates into a temporary folder and fails if the committed
// files differ, which is how tests catch stale generated code.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// packages maps API package folders to their deepcopy output.
var packages = []string{"api/v1", "api/v1alpha1", "api/aws/v1", "api/autoscaling/v1beta1"}

const crdDir = "config/crd"

func main() {
	verify := flag.Bool("verify", false, "fail if the committed generated files are stale instead of writing them")
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	if err := run(*root, *verify); err != nil {
		fmt.Fprintln(os.Stderr, "crdgen:", err)
		os.Exit(1)
	}
}

func run(root string, verify bool) error {
	out, err := os.MkdirTemp("", "crdgen")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)

	for _, pkg := range packages {
		dir := filepath.Join(out, pkg)
		if err := controllerGen(root, "object:headerFile=hack/boilerplate.go.txt", "paths=./"+pkg, "output:object:dir="+dir); err != nil {
			return err
		}
	}
	crds := filepath.Join(out, crdDir)
	if err := controllerGen(root, "crd", "paths=./api/...", "output:crd:dir="+crds); err != nil {
		return err
	}
	entries, err := os.ReadDir(crds)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := patchCRD(filepath.Join(crds, e.Name())); err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
	}

	var stale []string
	compare := func(generated, committed string) error {
		want, err := os.ReadFile(generated)
		if err != nil {
			return err
		}
		got, _ := os.ReadFile(committed)
		if bytes.Equal(want, got) {
			return nil
		}
		if verify {
			stale = append(stale, committed)
			return nil
		}
		return os.WriteFile(committed, want, 0o644)
	}
	for _, pkg := range packages {
		name := "zz_generated.deepcopy.go"
		if err := compare(filepath.Join(out, pkg, name), filepath.Join(root, pkg, name)); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := compare(filepath.Join(crds, e.Name()), filepath.Join(root, crdDir, e.Name())); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("generated files are stale, run `make generate`: %s", strings.Join(stale, ", "))
	}
	return nil
}

func controllerGen(root string, args ...string) error {
	cmd := exec.Command("go", append([]string{"tool", "controller-gen"}, args...)...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	cmd.Stdout = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("controller-gen %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

const (
	qualifiedNamePattern = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	labelValuePattern    = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// quantityPattern is resource.Quantity's grammar.
	quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
	// evictionThresholdPattern takes a percentage, a quantity, or (as
	// Karpenter's does, through its empty alternative) an empty string.
	evictionThresholdPattern = `^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$`
)

func patchCRD(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return err
	}
	for i := range crd.Spec.Versions {
		schema := crd.Spec.Versions[i].Schema.OpenAPIV3Schema
		spec := schema.Properties["spec"]
		switch crd.Spec.Names.Kind {
		case "NodePool":
			template := spec.Properties["template"]
			meta := template.Properties["metadata"]
			labels := meta.Properties["labels"]
			labels.AdditionalProperties.Schema.MaxLength = ptr(int64(63))
			labels.AdditionalProperties.Schema.Pattern = labelValuePattern
			meta.Properties["labels"] = labels
			template.Properties["metadata"] = meta
			tspec := template.Properties["spec"]
			patchNodeSpec(&tspec, true)
			template.Properties["spec"] = tspec
			spec.Properties["template"] = template
		case "NodeClaim":
			patchNodeSpec(&spec, false)
			status := schema.Properties["status"]
			patchNodeClaimConditions(&status)
			schema.Properties["status"] = status
		case "EC2NodeClass":
			patchKubelet(&spec)
		case "NodeOverlay":
			patchRequirementValues(&spec)
		}
		schema.Properties["spec"] = spec
	}
	// Helm never deletes a CRD marked keep, so "helm uninstall joiner-crd"
	// (or of the chart it took the CRDs over from, once that release is
	// retired as docs/install.md says) cannot delete every NodePool,
	// NodeClaim and EC2NodeClass with them.
	if crd.Annotations == nil {
		crd.Annotations = map[string]string{}
	}
	crd.Annotations["helm.sh/resource-policy"] = "keep"
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return err
	}
	// controller-gen writes an empty status block; keep the file to what it means.
	out = bytes.Replace(out, []byte("status:\n  acceptedNames:\n    kind: \"\"\n    plural: \"\"\n  conditions: null\n  storedVersions: null\n"), nil, 1)
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// patchNodeSpec fixes the taints and requirements of a NodeClaim spec or a
// NodePool template spec.
func patchNodeSpec(spec *apiextensionsv1.JSONSchemaProps, nodePool bool) {
	for _, field := range []string{"taints", "startupTaints"} {
		taints := spec.Properties[field]
		item := taints.Items.Schema
		key := item.Properties["key"]
		key.MinLength = ptr(int64(1))
		key.Pattern = qualifiedNamePattern
		item.Properties["key"] = key
		value := item.Properties["value"]
		value.Pattern = qualifiedNamePattern
		item.Properties["value"] = value
		effect := item.Properties["effect"]
		effect.Enum = []apiextensionsv1.JSON{{Raw: []byte(`"NoSchedule"`)}, {Raw: []byte(`"PreferNoSchedule"`)}, {Raw: []byte(`"NoExecute"`)}}
		item.Properties["effect"] = effect
		spec.Properties[field] = taints
	}
	patchRequirementValues(spec)
	reqs := spec.Properties["requirements"]
	if nodePool {
		key := reqs.Items.Schema.Properties["key"]
		rule := apiextensionsv1.ValidationRule{Rule: `self != "karpenter.sh/nodepool"`, Message: `label "karpenter.sh/nodepool" is restricted`}
		// Keep Karpenter's order: the domain rule, then this one.
		key.XValidations = append(key.XValidations[:1], append(apiextensionsv1.ValidationRules{rule}, key.XValidations[1:]...)...)
		reqs.Items.Schema.Properties["key"] = key
	}
	spec.Properties["requirements"] = reqs
}

// patchRequirementValues puts the label-value pattern and length on the
// requirement values list, where Karpenter's CRDs have them.
func patchRequirementValues(spec *apiextensionsv1.JSONSchemaProps) {
	reqs := spec.Properties["requirements"]
	values := reqs.Items.Schema.Properties["values"]
	values.MaxLength = ptr(int64(63))
	values.Pattern = labelValuePattern
	reqs.Items.Schema.Properties["values"] = values
	spec.Properties["requirements"] = reqs
}

// patchNodeClaimConditions loosens the condition items to Karpenter's.
func patchNodeClaimConditions(status *apiextensionsv1.JSONSchemaProps) {
	conditions := status.Properties["conditions"]
	item := conditions.Items.Schema
	item.Required = []string{"lastTransitionTime", "status", "type"}
	reason := item.Properties["reason"]
	reason.MinLength = nil
	reason.Pattern = `^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$`
	item.Properties["reason"] = reason
	status.Properties["conditions"] = conditions
}

// patchKubelet adds the value patterns of the kubelet's resource maps.
func patchKubelet(spec *apiextensionsv1.JSONSchemaProps) {
	kubelet := spec.Properties["kubelet"]
	for field, pattern := range map[string]string{
		"kubeReserved":   quantityPattern,
		"systemReserved": quantityPattern,
		"evictionHard":   evictionThresholdPattern,
		"evictionSoft":   evictionThresholdPattern,
	} {
		m := kubelet.Properties[field]
		m.AdditionalProperties.Schema.Pattern = pattern
		kubelet.Properties[field] = m
	}
	spec.Properties["kubelet"] = kubelet
}

func ptr[T any](v T) *T { return &v }
