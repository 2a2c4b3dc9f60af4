package scheduling

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
)

// m5LargeWith is the catalog's m5.large with its spot price set, and in
// each zone an on-demand offering per room at the room's price.
func m5LargeWith(t *testing.T, spot float64, rooms map[cloudprovider.Room]float64) *cloudprovider.InstanceType {
	t.Helper()
	for _, it := range testCatalog(t) {
		if it.Name != "m5.large" {
			continue
		}
		cp := it.Copy()
		cp.Offerings = nil
		for _, o := range it.Offerings {
			if o.CapacityType == "spot" {
				o.Price = spot
			}
			cp.Offerings = append(cp.Offerings, o)
			if o.CapacityType == "on-demand" {
				for room, price := range rooms {
					cp.Offerings = append(cp.Offerings, cloudprovider.Offering{Zone: o.Zone, CapacityType: "on-demand", Price: price, Available: true, Room: room})
				}
			}
		}
		return cp
	}
	t.Fatal("no m5.large in the catalog")
	return nil
}

// Commitments in the plan: 8 RIs (free) and a $1.00/h Savings Plan at
// 0.0672 for m5.large, offered in every zone; 30 pods that each need an
// m5.large of their own.
func TestCommitmentRoom(t *testing.T) {
	ri := cloudprovider.Room{ID: "ri-1", Left: 8, Takes: 1}
	sp := cloudprovider.Room{ID: "sp-1", Left: 1, Takes: 0.0672}
	both := map[cloudprovider.Room]float64{ri: 0, sp: 0.0672}
	cases := []struct {
		name         string
		spot         float64
		rooms        map[cloudprovider.Room]float64
		onDemandOnly bool
		want         map[string]int // "capacity type@price" → NodeClaims
	}{
		{name: "RIs, then the plan, then spot", spot: 0.08, rooms: both,
			want: map[string]int{"on-demand@0.0000": 8, "on-demand@0.0672": 14, "spot@0.0800": 8}},
		{name: "no commitments", spot: 0.08, want: map[string]int{"spot@0.0800": 30}},
		{name: "spot under the plan's rate", spot: 0.05, rooms: both,
			want: map[string]int{"on-demand@0.0000": 8, "spot@0.0500": 22}},
		{name: "on-demand only", spot: 0.08, rooms: both, onDemandOnly: true,
			want: map[string]int{"on-demand@0.0000": 8, "on-demand@0.0672": 14, "on-demand@0.0960": 8}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m5 := m5LargeWith(t, tc.spot, tc.rooms)
			reqs := []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"),
				req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand")}
			if tc.onDemandOnly {
				reqs[1] = req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand")
			}
			snap := Snapshot{Pods: replicas(30, "web", "1200m", "4Gi"), NodePools: []NodePool{{NodePool: mkNodePool("default", reqs...), InstanceTypes: []*cloudprovider.InstanceType{m5}}}}
			plan := Solve(snap, Options{})
			got := map[string]int{}
			for _, nc := range plan.NewNodeClaims {
				got[fmt.Sprintf("%s@%.4f", nc.Offering.CapacityType, nc.Price())]++
				if nc.Offering.Limited() {
					if ct := nc.Requirements[v1.LabelCapacityType]; ct == nil || ct.Len() != 1 || !ct.Has("on-demand") || len(nc.InstanceTypes) != 1 {
						t.Errorf("a NodeClaim given room is not pinned to it: capacity types %v, %d options", ct, len(nc.InstanceTypes))
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("NodeClaims %v, want %v\n%s", got, tc.want, summary(plan))
			}
			total := 0.0
			for k, n := range tc.want {
				_, p, _ := strings.Cut(k, "@")
				price, _ := strconv.ParseFloat(p, 64)
				total += float64(n) * price
			}
			if math.Abs(plan.TotalPrice()-total) > 1e-6 {
				t.Errorf("total %v, want %v", plan.TotalPrice(), total)
			}
		})
	}
}

// RIs of a type a list-price plan would not choose (m5.large, where three
// pods share an m5.xlarge on spot for less): the plan that uses them is
// cheaper, and Solve keeps it.
func TestCommitmentOfAnotherType(t *testing.T) {
	m5 := m5LargeWith(t, 0.08, map[cloudprovider.Room]float64{{ID: "ri-1", Left: 8, Takes: 1}: 0})
	var xl *cloudprovider.InstanceType
	for _, it := range testCatalog(t) {
		if it.Name == "m5.xlarge" {
			xl = it
		}
	}
	pool := mkNodePool("default", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand"))
	snap := Snapshot{Pods: replicas(30, "web", "1200m", "4Gi"), NodePools: []NodePool{{NodePool: pool, InstanceTypes: []*cloudprovider.InstanceType{m5, xl}}}}
	plain, _ := withoutLimited(snap)
	listed := Solve(plain, Options{})
	plan := Solve(snap, Options{})
	free := 0
	for _, nc := range plan.NewNodeClaims {
		if nc.InstanceType.Name == "m5.large" && nc.Price() == 0 {
			free++
		}
	}
	if free != 8 || plan.TotalPrice() >= listed.TotalPrice() {
		t.Errorf("%d RI-covered m5.large, total %.4f (list-price plan %.4f), want 8 and less:\n%s", free, plan.TotalPrice(), listed.TotalPrice(), summary(plan))
	}
}

// The list-price plan's NodeClaims get their types back before the room
// is handed out, so that they can take it: the copies withoutLimited made
// have no rooms.
func TestListedPlanTakesRoom(t *testing.T) {
	m5 := m5LargeWith(t, 0.08, map[cloudprovider.Room]float64{{ID: "ri-1", Left: 8, Takes: 1}: 0})
	pool := mkNodePool("default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"))
	plain, originals := withoutLimited(Snapshot{Pods: replicas(10, "web", "1200m", "4Gi"),
		NodePools: []NodePool{{NodePool: pool, InstanceTypes: []*cloudprovider.InstanceType{m5}}}})
	listed := solveOnce(plain, Options{})
	restore(listed.NewNodeClaims, originals)
	withinLimits(listed.NewNodeClaims)
	free := 0
	for _, nc := range listed.NewNodeClaims {
		if nc.Offering.Limited() {
			free++
		}
	}
	if free != 8 {
		t.Errorf("%d NodeClaims on the RIs' room, want 8:\n%s", free, summary(listed))
	}
}

// Consolidation's replacements take the commitments' room as a plan's
// NodeClaims do: a spot node's replacement on an RI's room is pinned to
// on-demand, and without room it is priced at list.
func TestReplacementTakesRoom(t *testing.T) {
	cases := []struct {
		name     string
		rooms    map[cloudprovider.Room]float64
		wantRoom bool
		want     float64
	}{
		{name: "an RI with room", rooms: map[cloudprovider.Room]float64{{ID: "ri-1", Left: 1, Takes: 1}: 0}, wantRoom: true, want: 0},
		{name: "an RI without room for a whole node", rooms: map[cloudprovider.Room]float64{{ID: "ri-1", Left: 0.5, Takes: 1}: 0}, want: 0.08},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m5 := m5LargeWith(t, 0.08, tc.rooms)
			spot := catalogNode(t, "spot-node", "m5.large", false, mkPod("web-0", "1200m", "4Gi"))
			spot.Labels[v1.LabelCapacityType] = "spot"
			pool := mkNodePool("default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"))
			c := NewCluster(Snapshot{Nodes: []*Node{spot}, NodePools: []NodePool{{NodePool: pool, InstanceTypes: []*cloudprovider.InstanceType{m5}}}}, Options{})
			r, err := c.TryRemove("spot-node")
			if err != nil || len(r.Replacements) != 1 {
				t.Fatalf("replacements %v (%v), want one", r.Replacements, err)
			}
			repl := r.Replacements[0]
			if repl.Offering.Limited() != tc.wantRoom || math.Abs(repl.Price()-tc.want) > 1e-9 {
				t.Errorf("replacement on room %v at $%v, want room %v at $%v", repl.Offering.Limited(), repl.Price(), tc.wantRoom, tc.want)
			}
			if ct := repl.Requirements[v1.LabelCapacityType]; tc.wantRoom && (ct == nil || ct.Len() != 1 || !ct.Has("on-demand")) {
				t.Errorf("the replacement on room is not pinned to on-demand: %v", ct)
			}
		})
	}
}
