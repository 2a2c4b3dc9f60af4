package convert

import "strings"

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

// passThrough leaves an object of another kind as it is, except for the
// legacy do-not-evict and do-not-consolidate annotations on a pod, a pod
// template or a node: v1 only reads karpenter.sh/do-not-disrupt, so
// leaving them would silently let Joiner disrupt what they protected.
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
