package disruption

import (
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// TestRepackPlansNewNodesAloneOnlyWhereRoomCannotServe checks when repack
// plans a set's pods onto new nodes alone, besides planning them with the
// room other nodes have: only where the room's command was refused for a
// reason of its own, not where it was taken or saved too little. Node a is
// the set; b has room for a's small pod only, so the room's plan uses b
// and one new node for the rest.
func TestRepackPlansNewNodesAloneOnlyWhereRoomCannotServe(t *testing.T) {
	c6a := req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "c6a")
	amd64 := req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")
	cases := []struct {
		name string
		// capacity type of node a, and those the pool allows
		aType string
		pool  []string
		big   string // CPU of a's pod that needs a new node
		// plans repack makes for the one set {a}
		plans int64
		// the command, or "" for none
		want string
	}{
		// The rest needs a c6a.2xlarge again: the room's plan saves
		// nothing, and the new nodes alone could save no more.
		{"the room's plan saves nothing", "on-demand", []string{"on-demand"}, "6", 1, ""},
		// The rest fits a c6a.xlarge: the room's plan is taken.
		{"the room's plan is taken", "on-demand", []string{"on-demand"}, "3", 1, "a -> c6a.xlarge/on-demand"},
		// A spot node may not become a spot node without spot-to-spot:
		// the room's plan is refused for that, so the new nodes alone are
		// planned too (and refused for the same reason).
		{"the room's plan is refused for spot", "spot", []string{"spot", "on-demand"}, "3", 2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := (&setup{}).add(node("a", "c6a.2xlarge", tc.aType, pod("a-small", "500m", "1Gi"), pod("a-big", tc.big, "4Gi")))
			s.add(node("b", "c6a.2xlarge", "on-demand", pod("b-0", "7", "8Gi")))
			pool := nodePool("default", amd64, c6a, req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, tc.pool...))
			snap := scheduling.Snapshot{Nodes: s.nodes, NodePools: []scheduling.NodePool{{NodePool: pool, InstanceTypes: catalogTypes()}}}
			before := repackPlans.Load()
			cmd, ok := repack(snap, newKubeModel(snap), s.cands[:1], map[string]int{"default": 1}, Options{}, totalsByPool(snap, s.cands))
			plans := repackPlans.Load() - before
			got := ""
			if ok {
				got, _, _ = strings.Cut(describe(cmd), " saving")
			}
			if got != tc.want || plans != tc.plans {
				t.Fatalf("got %q in %d plans, want %q in %d", got, plans, tc.want, tc.plans)
			}
		})
	}
}
