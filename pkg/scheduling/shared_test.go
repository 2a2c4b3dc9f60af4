package scheduling

import (
	"fmt"
	"sort"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSharedPlansMatchFreshOnes: plans started from one Shared, one after
// another, are each the plan a fresh solver makes. A plan that left its
// pool usage, its existing nodes' pods or host ports, or its topology
// domains in the Shared would change the next one: the limited pool's
// case sees its limit spent twice, the existing nodes' case their room.
func TestSharedPlansMatchFreshOnes(t *testing.T) {
	limited := guide03Pool()
	limited.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("16")}
	app := map[string]string{"app": "web"}
	cases := []struct {
		name  string
		pools []*v1.NodePool
		nodes func(t *testing.T) []*Node
		pods  []*corev1.Pod
		// storage, when set, resolves the pods' claims.
		storage func(st *storage)
	}{
		{name: "limited pool", pools: []*v1.NodePool{limited},
			pods: replicas(12, "p", "1", "1Gi")},
		{name: "existing nodes with room, host ports and a zone spread", pools: []*v1.NodePool{guide03Pool()},
			nodes: func(t *testing.T) []*Node {
				return []*Node{
					catalogNode(t, "a", "m5.xlarge", false, mkPod("a-0", "2", "1Gi", hostPortOpt(8080), withLabels("app", "web"))),
					catalogNode(t, "b", "m5.xlarge", false, mkPod("b-0", "3", "2Gi")),
				}
			},
			pods: append(replicas(6, "port", "500m", "512Mi", hostPortOpt(8080)),
				replicas(9, "web", "1", "2Gi", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, app))...)},
		{name: "an existing node at its attach limit", pools: []*v1.NodePool{guide03Pool()},
			nodes: func(t *testing.T) []*Node {
				return []*Node{zoneNode("full", "us-east-1a", 2, mkPod("db-0", "100m", "128Mi", withClaims("d0")), mkPod("db-1", "100m", "128Mi", withClaims("d1")))}
			},
			pods: []*corev1.Pod{mkPod("db-2", "100m", "128Mi", withClaims("d2"))},
			storage: func(st *storage) {
				for _, c := range []string{"d0", "d1", "d2"} {
					st.zonalDisk(c, "us-east-1a")
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap := Snapshot{Pods: c.pods}
			for _, np := range c.pools {
				snap.NodePools = append(snap.NodePools, NodePool{NodePool: np, InstanceTypes: testCatalog(t)})
			}
			if c.nodes != nil {
				snap.Nodes = c.nodes(t)
			}
			if c.storage != nil {
				var st storage
				c.storage(&st)
				st.apply(&snap)
			}
			want := planString(Solve(snap, Options{}))
			snap.Shared = Share(snap)
			for i := range 3 {
				if got := planString(Solve(snap, Options{})); got != want {
					t.Fatalf("plan %d from the Shared:\n%s\nfresh:\n%s", i+1, got, want)
				}
			}
		})
	}
}

// planString is summary with where each pod went.
func planString(p *Plan) string {
	var placed []string
	for pod, node := range p.Existing {
		placed = append(placed, pod+"→"+node)
	}
	for i, nc := range p.NewNodeClaims {
		for _, pod := range nc.Pods {
			placed = append(placed, fmt.Sprintf("%s→new-%d", pod.Name, i))
		}
	}
	sort.Strings(placed)
	return summary(p) + fmt.Sprintf("\n%v", placed)
}
