package convert

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	corev1 "k8s.io/api/core/v1"
)

const (
	labelCategory   = awsGroup + "/instance-category"
	labelFamily     = awsGroup + "/instance-family"
	labelGeneration = awsGroup + "/instance-generation"
	// v1alpha5's label for the owning Provisioner; v1 sets karpenter.sh/nodepool itself.
	labelProvisionerName  = coreGroup + "/provisioner-name"
	labelInstanceTypeBeta = "beta.kubernetes.io/instance-type"
)

// wellKnownAWS are the karpenter.k8s.aws labels v1 lets a NodePool name, in
// template labels and requirements; the CRD refuses the rest of the domain.
var wellKnownAWS = map[string]bool{}

func init() {
	for _, k := range []string{"ec2nodeclass", "instance-encryption-in-transit-supported", "instance-category", "instance-hypervisor",
		"instance-family", "instance-generation", "instance-local-nvme", "instance-size", "instance-cpu", "instance-cpu-manufacturer",
		"instance-cpu-sustained-clock-speed-mhz", "instance-memory", "instance-ebs-bandwidth", "instance-network-bandwidth",
		"instance-gpu-name", "instance-gpu-manufacturer", "instance-gpu-count", "instance-gpu-memory", "instance-accelerator-name",
		"instance-accelerator-manufacturer", "instance-accelerator-count", "instance-capability-flex", "instance-tenancy",
		"capacity-reservation-id", "capacity-reservation-type", "capacity-reservation-interruptible", "placement-group-id",
		"placement-group-partition"} {
		wellKnownAWS[awsGroup+"/"+k] = true
	}
}

// restricted says why v1 refuses key in a NodePool template's labels
// (forLabels) or requirements, or "" when it does not. The rules are the
// CRD's.
func restricted(key string, forLabels bool) string {
	domain, _, _ := strings.Cut(key, "/")
	switch {
	case key == corev1.LabelHostname:
		return fmt.Sprintf("label %q is restricted", key)
	case key == v1.LabelNodePool && forLabels:
		return fmt.Sprintf("label %q is restricted: the controller sets it", key)
	case strings.HasSuffix(domain, coreGroup) && key != v1.LabelCapacityType && key != v1.LabelNodePool:
		return `label domain "karpenter.sh" is restricted`
	case strings.HasSuffix(domain, awsGroup) && !wellKnownAWS[key]:
		return `label domain "karpenter.k8s.aws" is restricted`
	}
	return ""
}

// templateLabels drops the labels v1 refuses, with a note each.
func (c *converter) templateLabels(ref, field string, labels map[string]string) map[string]string {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if why := restricted(k, true); why != "" {
			c.note(ref, field+"["+k+"]", "dropped: "+why+" in v1")
			delete(labels, k)
		}
	}
	return labels
}

// templateAnnotations renames the legacy do-not-evict and do-not-consolidate
// annotations to do-not-disrupt.
func (c *converter) templateAnnotations(ref, field string, ann map[string]string) map[string]string {
	renameDoNot(ann, func(old, msg string) { c.note(ref, field+"["+old+"]", msg) })
	return ann
}

// renameDoNot rewrites karpenter.sh/do-not-evict and do-not-consolidate as
// karpenter.sh/do-not-disrupt, which v1 reads instead of both.
func renameDoNot(ann map[string]string, note func(old, msg string)) {
	for _, old := range []string{annEvict, annConsolid} {
		val, ok := ann[old]
		if !ok {
			continue
		}
		delete(ann, old)
		switch {
		case ann[annDisrupt] != "":
			note(old, "dropped: "+annDisrupt+" is already set")
		case val == "true":
			ann[annDisrupt] = "true"
			note(old, "renamed "+annDisrupt)
		default:
			note(old, fmt.Sprintf("dropped: value %q never blocked disruption (only \"true\" did)", val))
		}
	}
}

// requirements drops keys v1 refuses and rewrites instance-type values that
// are instance categories or families, not types.
func (c *converter) requirements(ref, field string, reqs []v1.NodeSelectorRequirementWithMinValues) []v1.NodeSelectorRequirementWithMinValues {
	out := reqs[:0]
	for i, r := range reqs {
		at := fmt.Sprintf("%s[%d]", field, i)
		if r.Key == labelInstanceTypeBeta {
			r.Key = corev1.LabelInstanceTypeStable
			c.note(ref, at+".key", fmt.Sprintf("%s is the deprecated name of %s; renamed", labelInstanceTypeBeta, corev1.LabelInstanceTypeStable))
		}
		if r.Key == labelProvisionerName {
			c.note(ref, at, fmt.Sprintf("dropped: %s is gone in v1, and a NodePool's nodes carry %s=<its name> anyway", labelProvisionerName, v1.LabelNodePool))
			continue
		}
		if why := restricted(r.Key, false); why != "" {
			c.note(ref, at, fmt.Sprintf("dropped the requirement on %s: %s in v1", r.Key, why))
			continue
		}
		if r.Key == corev1.LabelInstanceTypeStable && (r.Operator == corev1.NodeSelectorOpIn || r.Operator == corev1.NodeSelectorOpNotIn) {
			r = c.instanceTypeValues(ref, at, r)
		}
		out = append(out, r)
	}
	return out
}

// instanceTypeValues handles an instance-type requirement whose values are
// not instance types: "c", "m" are categories and "c5" a family. No node
// ever had such a type, so the requirement matched nothing; what the author
// meant is the category (or family), and that is what it becomes, with a
// note. Values that mix kinds are left alone and noted: one requirement
// cannot say "this type or that category".
func (c *converter) instanceTypeValues(ref, at string, r v1.NodeSelectorRequirementWithMinValues) v1.NodeSelectorRequirementWithMinValues {
	kinds := map[string][]string{}
	for _, v := range r.Values {
		k := catalogKinds().kindOf(v)
		kinds[k] = append(kinds[k], v)
	}
	if len(kinds["category"]) == 0 && len(kinds["family"]) == 0 {
		return r
	}
	if len(kinds) > 1 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			parts = append(parts, fmt.Sprintf("%s %s", k, strings.Join(kinds[k], ",")))
		}
		c.note(ref, at, fmt.Sprintf("left unchanged, but its values mix kinds (%s): the values that are not instance types match no node; split it into requirements on %s and %s",
			strings.Join(parts, "; "), labelCategory, labelFamily))
		return r
	}
	key, what := labelCategory, "categories"
	if len(kinds["family"]) > 0 {
		key, what = labelFamily, "families"
	}
	c.note(ref, at, fmt.Sprintf("values %s are instance %s, not instance types (no node has such a type); the requirement is now on %s",
		strings.Join(r.Values, ","), what, key))
	r.Key = key
	return r
}

type kindIndex struct {
	types, categories, families map[string]bool
}

func (k *kindIndex) kindOf(v string) string {
	switch {
	case k.types[v]:
		return "type"
	case k.categories[v]:
		return "category"
	case k.families[v]:
		return "family"
	}
	return "unknown"
}

var catalogKinds = sync.OnceValue(func() *kindIndex {
	idx := &kindIndex{types: map[string]bool{}, categories: map[string]bool{}, families: map[string]bool{}}
	names, _ := catalog.Names()
	for _, n := range names {
		rec, _ := catalog.Lookup(n)
		idx.types[n] = true
		if cat := rec.Labels[labelCategory]; cat != "" {
			idx.categories[cat] = true
		}
		if fam := rec.Labels[labelFamily]; fam != "" {
			idx.families[fam] = true
		}
	}
	return idx
})

// alphaDefaults adds the requirements v1alpha5's webhook gave a Provisioner
// that left them open, since v1 adds none: Linux, amd64, on-demand, and
// categories c, m, r of a generation above 2 unless the instance types
// were constrained in some way.
func (c *converter) alphaDefaults(ref string, reqs []v1.NodeSelectorRequirementWithMinValues, labels map[string]string) []v1.NodeSelectorRequirementWithMinValues {
	has := map[string]bool{}
	for k := range labels {
		has[k] = true
	}
	for _, r := range reqs {
		has[r.Key] = true
	}
	var added []string
	add := func(key string, op corev1.NodeSelectorOperator, values ...string) {
		reqs = append(reqs, v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
		added = append(added, fmt.Sprintf("%s %s %s", key, op, strings.Join(values, ",")))
	}
	if !has[corev1.LabelOSStable] {
		add(corev1.LabelOSStable, corev1.NodeSelectorOpIn, string(corev1.Linux))
	}
	if !has[corev1.LabelArchStable] {
		add(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")
	}
	if !has[v1.LabelCapacityType] {
		add(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand)
	}
	if !has[corev1.LabelInstanceTypeStable] && !has[labelFamily] && !has[labelCategory] && !has[labelGeneration] {
		add(labelCategory, corev1.NodeSelectorOpIn, "c", "m", "r")
		add(labelGeneration, corev1.NodeSelectorOpGt, "2")
	}
	if len(added) > 0 {
		sort.Strings(added)
		c.note(ref, "spec.requirements", "added v1alpha5's defaults, which v1 no longer applies (--ignore-defaults leaves them out): "+strings.Join(added, "; "))
	}
	return reqs
}
