package buffers

import (
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// Tally is where a plan put one buffer's virtual pods.
type Tally struct {
	Existing, New, Failed int
}

// Tallies counts, per buffer (namespace/name), the virtual pods of pending
// that a plan put on existing or in-flight capacity, on new NodeClaims, or
// nowhere.
func Tallies(plan *scheduling.Plan, pending []*corev1.Pod) map[string]*Tally {
	out := map[string]*Tally{}
	get := func(key string) *Tally {
		if out[key] == nil {
			out[key] = &Tally{}
		}
		return out[key]
	}
	for _, p := range pending {
		if _, ok := plan.Existing[p.Namespace+"/"+p.Name]; ok && IsVirtual(p) {
			get(Owner(p)).Existing++
		}
	}
	for _, nc := range plan.NewNodeClaims {
		for _, p := range nc.Pods {
			if IsVirtual(p) {
				get(Owner(p)).New++
			}
		}
	}
	for _, u := range plan.Unschedulable {
		if IsVirtual(u.Pod) {
			get(Owner(u.Pod)).Failed++
		}
	}
	return out
}
