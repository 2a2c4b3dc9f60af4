package scheduling

import (
	"math"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestCheapestIsSizesFirstChoice holds squeeze's shortcut to what the
// plan launches: for every node placed, cheapest picks the type and price
// size would put first, and a ceiling at that price finds nothing under it.
func TestCheapestIsSizesFirstChoice(t *testing.T) {
	zoned := append(replicas(40, "z", "1500m", "3Gi", nodeAffinityTerms(
		[]corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1c"}}},
	)), diversePods(200)...)
	onDemand := replicas(60, "od", "900m", "2Gi", nodeAffinityTerms(
		[]corev1.NodeSelectorRequirement{{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
	))
	tests := []struct {
		name  string
		pools []*v1.NodePool
		pods  []*corev1.Pod
	}{
		{"diverse pods, one pool", []*v1.NodePool{onDemandPool("od")}, diversePods(400)},
		{"spot and on-demand", []*v1.NodePool{mkNodePool("any")}, diversePods(300)},
		// Types are in order of their cheapest offering, spot here, so the
		// first type that fits is not always the cheapest on-demand.
		{"on-demand asked of a pool with spot", []*v1.NodePool{mkNodePool("any")}, append(onDemand, diversePods(200)...)},
		{"a zone asked for", []*v1.NodePool{onDemandPool("od")}, zoned},
		{"arm64 only", []*v1.NodePool{mkNodePool("arm", req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64"))}, replicas(90, "a", "700m", "5Gi")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := Snapshot{Pods: tc.pods}
			for _, np := range tc.pools {
				snap.NodePools = append(snap.NodePools, NodePool{NodePool: np, InstanceTypes: testCatalog(t)})
			}
			s := place(snap, Options{}, false)
			if len(s.virtual) == 0 {
				t.Fatal("no nodes placed")
			}
			for _, n := range s.virtual {
				nc := s.rightSize(n, false)
				got, ok := s.cheapest(n, math.Inf(1))
				if nc == nil {
					if ok {
						t.Fatalf("node %s: size finds no type, cheapest finds %s", n.name, got.t.it.Name)
					}
					continue
				}
				if !ok {
					t.Fatalf("node %s: cheapest finds no type, size chose %s", n.name, nc.InstanceType.Name)
				}
				if got.t.it != nc.InstanceType || got.price != nc.Price() {
					t.Fatalf("node %s: cheapest %s at %v, size chose %s at %v", n.name, got.t.it.Name, got.price, nc.InstanceType.Name, nc.Price())
				}
				if _, under := s.cheapest(n, nc.Price()); under {
					t.Fatalf("node %s: cheapest finds a type under %v, the cheapest price", n.name, nc.Price())
				}
			}
		})
	}
}
