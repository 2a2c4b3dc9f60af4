package scheduling

import (
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestWithinLimits: a node fits a pool's limits when, added to what the
// pool has, no limited resource it has goes over; limits on resources
// neither has, and the node count, are not its business. The check runs
// for every node a plan opens, and allocates nothing.
func TestWithinLimits(t *testing.T) {
	const gpu corev1.ResourceName = "nvidia.com/gpu"
	q := resource.MustParse
	usage := resources.Resources{CPU: 6000, Memory: 8 << 30, Pods: 20}
	node := resources.Resources{CPU: 4000, Memory: 16 << 30, Pods: 58}
	for _, tc := range []struct {
		name   string
		limits corev1.ResourceList
		want   bool
	}{
		{"no limits", nil, true},
		{"cpu exactly at the limit", corev1.ResourceList{corev1.ResourceCPU: q("10")}, true},
		{"cpu a millicore over", corev1.ResourceList{corev1.ResourceCPU: q("9999m")}, false},
		{"memory over", corev1.ResourceList{corev1.ResourceMemory: q("20Gi")}, false},
		{"memory under", corev1.ResourceList{corev1.ResourceMemory: q("24Gi")}, true},
		{"a resource neither has", corev1.ResourceList{gpu: q("0")}, true},
		{"only nodes", corev1.ResourceList{"nodes": q("1")}, true},
		{"pods over", corev1.ResourceList{corev1.ResourcePods: q("77")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pool{limits: tc.limits, acct: &account{usage: usage}}
			if got := p.withinLimits(node); got != tc.want {
				t.Fatalf("withinLimits = %v, want %v", got, tc.want)
			}
			if allocs := testing.AllocsPerRun(100, func() { p.withinLimits(node) }); allocs != 0 {
				t.Fatalf("%v allocations per check, want 0", allocs)
			}
		})
	}
}
