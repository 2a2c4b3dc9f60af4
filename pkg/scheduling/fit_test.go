package scheduling

import (
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
)

// TestUntoleratedRejections: a node whose taint a pod does not tolerate
// rejects it with that taint, whichever node and taint of the plan it is,
// and a scan meeting the same taint again allocates nothing.
func TestUntoleratedRejections(t *testing.T) {
	spot := corev1.Taint{Key: "spot", Value: "only", Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoExecute}
	tolerateSpot := []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}
	roomy := resources.Resources{CPU: 4000, Memory: 16 << 30, Pods: 110}
	s := &solver{}
	for _, tc := range []struct {
		name        string
		taints      []corev1.Taint
		tolerations []corev1.Toleration
		want        string
	}{
		{"the first taint", []corev1.Taint{spot}, nil, "did not tolerate taint spot=only:NoSchedule"},
		{"another node's taint", []corev1.Taint{gpu}, nil, "did not tolerate taint gpu:NoExecute"},
		{"the second taint, the first tolerated", []corev1.Taint{spot, gpu}, tolerateSpot, "did not tolerate taint gpu:NoExecute"},
		{"the same taint on a third node", []corev1.Taint{spot}, nil, "did not tolerate taint spot=only:NoSchedule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &node{taints: tc.taints, capacity: roomy}
			pg := &podGroup{tolerations: tc.tolerations, requests: resources.Resources{CPU: 100, Pods: 1}}
			pc := &podConstraints{}
			rej := s.check(pg, pc, n)
			if rej == nil || rej.err.Error() != tc.want || !rej.monotonic {
				t.Fatalf("check = %+v, want a monotonic %q", rej, tc.want)
			}
			if allocs := testing.AllocsPerRun(100, func() { s.check(pg, pc, n) }); allocs != 0 {
				t.Fatalf("%v allocations per check, want 0", allocs)
			}
		})
	}
}
