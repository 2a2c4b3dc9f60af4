package disruption

import (
	"fmt"
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// underRIs prices the candidates as the bill does under count regional
// m5.large RIs (commitment.Savings, one at a time) and gives Saving, as
// the controller does from cloudprovider.Bill.
func underRIs(count int, s *setup) Options {
	cm := commitment.Commitments{ReservedInstances: []commitment.ReservedInstance{{ID: "ri-1", Type: "m5.large", Count: count}}}
	var fleet []commitment.Instance
	for _, c := range s.cands {
		fleet = append(fleet, commitment.Instance{ID: c.NodeClaim, Type: c.InstanceType, Zone: "us-east-1a", CapacityType: c.CapacityType, ListPrice: c.Price})
	}
	savings := commitment.Savings(cm, fleet)
	saving := func(names []string) float64 {
		removed := map[string]bool{}
		for _, n := range names {
			removed[n] = true
		}
		return savings(removed)
	}
	for i := range s.cands {
		s.cands[i].Price = saving([]string{s.cands[i].NodeClaim})
	}
	return Options{Saving: saving}
}

// Under Reserved Instances, consolidation removes the nodes whose removal
// lowers the bill, together: of 10 empty on-demand m5.large under 8 RIs,
// 2 go and 8 stay (each saves its price alone, but once two have gone the
// RIs cover the rest). Pods on spot nodes move onto on-demand nodes the
// RIs pay for. At list prices, every empty node goes.
func TestConsolidationUnderCommitments(t *testing.T) {
	onDemand := func(n int, podsEach int) *setup {
		s := &setup{}
		for i := range n {
			var pods []*corev1.Pod
			for j := range podsEach {
				pods = append(pods, pod(fmt.Sprintf("p-%d-%d", i, j), "100m", "128Mi"))
			}
			s.add(node(fmt.Sprintf("od-%d", i), "m5.large", "on-demand", pods...))
		}
		return s
	}
	cases := []struct {
		name string
		// ris is how many m5.large RIs the account has; -1 for none
		// known (list prices, no Saving).
		ris   int
		setup func() *setup
		// wantOD and wantSpot are how many of each the commands remove.
		wantOD, wantSpot int
		wantKept         string
	}{
		{name: "10 empty under 8 RIs: 2 go", ris: 8, setup: func() *setup { return onDemand(10, 0) }, wantOD: 2, wantKept: SavesNothingReason},
		{name: "10 empty at list prices: all go", ris: -1, setup: func() *setup { return onDemand(10, 0) }, wantOD: 10},
		{name: "10 nearly empty under 8 RIs: 2 go", ris: 8, setup: func() *setup { return onDemand(10, 1) }, wantOD: 2, wantKept: SavesNothingReason},
		{name: "spot pods move onto nodes the RIs pay for", ris: 8, setup: func() *setup {
			s := onDemand(8, 0)
			s.add(node("spot-0", "m5.large", "spot", pod("s0", "100m", "128Mi")))
			return s.add(node("spot-1", "m5.large", "spot", pod("s1", "100m", "128Mi")))
		}, wantSpot: 2, wantKept: SavesNothingReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.setup()
			var opts Options
			if tc.ris >= 0 {
				opts = underRIs(tc.ris, s)
			}
			opts.Allowed = map[string]int{"default": 100}
			snap := scheduling.Snapshot{Nodes: s.nodes, NodePools: []scheduling.NodePool{{NodePool: guide03Spot(), InstanceTypes: catalogTypes()}}}
			d := Consolidate(snap, s.cands, opts)
			od, spot := 0, 0
			for _, c := range d.Commands {
				if len(c.Replacements) > 0 {
					t.Errorf("a replacement under commitments: %v", summary(d))
				}
				for _, cand := range c.Candidates {
					if strings.HasPrefix(cand.Node, "spot") {
						spot++
					} else {
						od++
					}
				}
			}
			if od != tc.wantOD || spot != tc.wantSpot {
				t.Fatalf("%d on-demand and %d spot nodes go, want %d and %d: %v skipped %v", od, spot, tc.wantOD, tc.wantSpot, summary(d), d.Skipped)
			}
			if tc.wantKept != "" && !strings.Contains(fmt.Sprint(d.Skipped), tc.wantKept) {
				t.Errorf("no node kept says %q: %v", tc.wantKept, d.Skipped)
			}
		})
	}
}

// guide03Spot is guide 03's pool with spot allowed too.
func guide03Spot() *v1.NodePool {
	np := guide03()
	np.Spec.Template.Spec.Requirements[1] = req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand")
	return np
}

// Consolidation may replace nodes under a pool's spend cap: the
// replacement launches before the node goes, so it counts beside the
// pool's nodes. A c6a.2xlarge ($0.306/h) with one small pod is replaced
// by a cheaper node when the cap has room for both, and kept, saying the
// cap stops it, when it has not.
func TestConsolidationUnderASpendCap(t *testing.T) {
	for _, tc := range []struct {
		cap         string
		wantReplace bool
	}{
		{cap: "1.00", wantReplace: true},
		{cap: "0.35", wantReplace: false},
	} {
		t.Run(tc.cap, func(t *testing.T) {
			s := (&setup{}).add(node("big", "c6a.2xlarge", "on-demand", pod("p", "1", "1536Mi")))
			np := guide03()
			np.Annotations = map[string]string{spendcap.Annotation: tc.cap}
			inUse := corev1.ResourceList{spendcap.Resource: *resource.NewQuantity(spendcap.Micro(s.cands[0].Price), resource.DecimalSI)}
			snap := scheduling.Snapshot{Nodes: s.nodes, NodePools: []scheduling.NodePool{{NodePool: np, InstanceTypes: catalogTypes(), InUse: inUse}}}
			d := Consolidate(snap, s.cands, Options{Allowed: map[string]int{"default": 1}})
			replaced := len(d.Commands) == 1 && len(d.Commands[0].Replacements) == 1
			if replaced != tc.wantReplace {
				t.Fatalf("replaced %v, want %v: %v skipped %v", replaced, tc.wantReplace, summary(d), d.Skipped)
			}
			if !replaced && !strings.Contains(d.Skipped["big"], "spend cap") {
				t.Errorf("kept without naming the cap: %q", d.Skipped["big"])
			}
		})
	}
}
