package convert

import (
	"fmt"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
)

// podTemplatePaths are where workload kinds keep their pod template.
var podTemplatePaths = map[string][]string{
	"Deployment":            {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"ReplicationController": {"spec", "template"},
	"Job":                   {"spec", "template"},
	"PodTemplate":           {"template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
}

// passThrough leaves an object of another kind as it is, except for:
//   - the legacy do-not-evict and do-not-consolidate annotations on a pod, a
//     pod template or a node: v1 only reads karpenter.sh/do-not-disrupt, so
//     leaving them would silently let Joiner disrupt what they protected;
//   - karpenter.sh/provisioner-name in a pod's node selector and node
//     affinity: v1 labels nodes karpenter.sh/nodepool (a converted
//     Provisioner keeps its name), so a workload left selecting the old key
//     would never schedule on the converted pools.
func (c *converter) passThrough(ref string, obj Object) {
	kind, _ := obj["kind"].(string)
	var path []string
	switch {
	case kind == "Pod" || kind == "Node":
		path = nil
	case podTemplatePaths[kind] != nil:
		path = podTemplatePaths[kind]
	default:
		return
	}
	m := obj
	for _, p := range path {
		next, _ := m[p].(map[string]any)
		if next == nil {
			return
		}
		m = next
	}
	if kind != "Node" {
		spec, _ := m["spec"].(map[string]any)
		c.renameProvisionerName(ref, strings.Join(append(append([]string{}, path...), "spec"), "."), spec)
	}
	meta, _ := m["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		return
	}
	field := strings.Join(append(append([]string{}, path...), "metadata", "annotations"), ".")
	str := map[string]string{}
	for k, v := range ann {
		if s, ok := v.(string); ok {
			str[k] = s
		}
	}
	renameDoNot(str, func(old, msg string) { c.note(ref, field+"["+old+"]", msg) })
	for _, k := range []string{annEvict, annConsolid} {
		delete(ann, k)
	}
	if v, ok := str[annDisrupt]; ok {
		ann[annDisrupt] = v
	}
	if len(ann) == 0 {
		delete(meta, "annotations")
	}
}

// renameProvisionerName moves a pod spec's node selector and node affinity
// terms from karpenter.sh/provisioner-name to karpenter.sh/nodepool.
func (c *converter) renameProvisionerName(ref, field string, spec map[string]any) {
	if spec == nil {
		return
	}
	msg := "renamed " + v1.LabelNodePool + ", the label v1 puts on nodes (a converted Provisioner keeps its name)"
	if sel, _ := spec["nodeSelector"].(map[string]any); sel != nil {
		if v, ok := sel[labelProvisionerName]; ok {
			delete(sel, labelProvisionerName)
			sel[v1.LabelNodePool] = v
			c.note(ref, field+".nodeSelector["+labelProvisionerName+"]", msg)
		}
	}
	affinity, _ := spec["affinity"].(map[string]any)
	nodeAffinity, _ := affinity["nodeAffinity"].(map[string]any)
	if nodeAffinity == nil {
		return
	}
	base := field + ".affinity.nodeAffinity."
	rename := func(term map[string]any, at string) {
		for _, list := range []string{"matchExpressions", "matchFields"} {
			exprs, _ := term[list].([]any)
			for i, e := range exprs {
				expr, _ := e.(map[string]any)
				if expr != nil && expr["key"] == labelProvisionerName {
					expr["key"] = v1.LabelNodePool
					c.note(ref, fmt.Sprintf("%s.%s[%d].key", at, list, i), msg)
				}
			}
		}
	}
	if req, _ := nodeAffinity["requiredDuringSchedulingIgnoredDuringExecution"].(map[string]any); req != nil {
		terms, _ := req["nodeSelectorTerms"].([]any)
		for i, t := range terms {
			if term, _ := t.(map[string]any); term != nil {
				rename(term, fmt.Sprintf("%srequiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d]", base, i))
			}
		}
	}
	prefs, _ := nodeAffinity["preferredDuringSchedulingIgnoredDuringExecution"].([]any)
	for i, p := range prefs {
		pref, _ := p.(map[string]any)
		if term, _ := pref["preference"].(map[string]any); term != nil {
			rename(term, fmt.Sprintf("%spreferredDuringSchedulingIgnoredDuringExecution[%d].preference", base, i))
		}
	}
}
