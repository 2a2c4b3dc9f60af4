package scheduling

import (
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

// A pod no NodePool can run gets each pool's reason, named by pool, for
// `joiner explain pod`: the requirement that excludes one, the taint
// another does not tolerate; the Reason says the same in one line.
func TestPodErrorNamesEachPool(t *testing.T) {
	spot := mkNodePool("spot", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot"))
	gpu := mkNodePool("gpu")
	gpu.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	pod := replicas(1, "web", "1", "1Gi")[0]
	pod.Spec.NodeSelector = map[string]string{v1.LabelCapacityType: "on-demand"}
	snap := Snapshot{Pods: []*corev1.Pod{pod}, NodePools: []NodePool{{NodePool: spot, InstanceTypes: testCatalog(t)}, {NodePool: gpu, InstanceTypes: testCatalog(t)}}}
	plan := Solve(snap, Options{})
	if len(plan.Unschedulable) != 1 {
		t.Fatalf("%d pods unschedulable, want 1", len(plan.Unschedulable))
	}
	u := plan.Unschedulable[0]
	want := []struct{ pool, says string }{{"spot", "karpenter.sh/capacity-type"}, {"gpu", "did not tolerate taint nvidia.com/gpu=true:NoSchedule"}}
	if len(u.Pools) != len(want) {
		t.Fatalf("pools %+v, want %v", u.Pools, want)
	}
	for i, w := range want {
		if u.Pools[i].NodePool != w.pool || !strings.Contains(u.Pools[i].Reason, w.says) || !strings.Contains(u.Reason, `nodepool "`+w.pool+`": `+u.Pools[i].Reason) {
			t.Errorf("pool %d: %+v, want %s saying %q; reason %q", i, u.Pools[i], w.pool, w.says, u.Reason)
		}
	}
}
