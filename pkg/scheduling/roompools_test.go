package scheduling

import (
	"fmt"
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A NodePool's commitment pools are the NodePool: its limits and its
// spend cap count the nodes on the commitments' room with the others. 30
// pods that each need an m5.large (2 CPUs) under 8 RIs and a $1.00/h plan
// at 0.0672, spot at 0.08.
func TestCommitmentPoolsShareTheNodePoolsLimits(t *testing.T) {
	rooms := map[cloudprovider.Room]float64{{ID: "ri-1", Left: 8, Takes: 1}: 0, {ID: "sp-1", Left: 1, Takes: 0.0672}: 0.0672}
	cases := []struct {
		name   string
		limits corev1.ResourceList
		cap    string
		want   map[string]int // "capacity type@price" → NodeClaims
		left   int            // pods unschedulable
	}{
		{name: "no limits", want: map[string]int{"on-demand@0.0000": 8, "on-demand@0.0672": 14, "spot@0.0800": 8}},
		{name: "20 CPUs: the RIs, then the plan", limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20")},
			want: map[string]int{"on-demand@0.0000": 8, "on-demand@0.0672": 2}, left: 20},
		{name: "12 nodes", limits: corev1.ResourceList{"nodes": resource.MustParse("12")},
			want: map[string]int{"on-demand@0.0000": 8, "on-demand@0.0672": 4}, left: 18},
		// The RIs' nodes count nothing against the cap, the plan's their
		// rate: 14 of them ($0.9408/h) under $1.00, then one spot node,
		// counted at on-demand's $0.096 (a launch may fall back to it).
		{name: "a $1.04/h cap", cap: "1.04",
			want: map[string]int{"on-demand@0.0000": 8, "on-demand@0.0672": 14, "spot@0.0800": 1}, left: 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m5 := m5LargeWith(t, 0.08, rooms)
			pool := mkNodePool("default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"),
				req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand"))
			pool.Spec.Limits = v1.Limits(tc.limits)
			if tc.cap != "" {
				pool.Annotations = map[string]string{spendcap.Annotation: tc.cap}
			}
			snap := Snapshot{Pods: replicas(30, "web", "1200m", "4Gi"), NodePools: []NodePool{{NodePool: pool, InstanceTypes: []*cloudprovider.InstanceType{m5}}}}
			plan := Solve(snap, Options{})
			got := map[string]int{}
			for _, nc := range plan.NewNodeClaims {
				got[fmt.Sprintf("%s@%.4f", nc.Offering.CapacityType, nc.Price())]++
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || len(plan.Unschedulable) != tc.left {
				t.Errorf("NodeClaims %v and %d pods left, want %v and %d\n%s", got, len(plan.Unschedulable), tc.want, tc.left, summary(plan))
			}
			// The reason is the NodePool's, once, without the planner's
			// bookkeeping of the rooms.
			for _, u := range plan.Unschedulable {
				if strings.Contains(u.Reason, roomResourcePrefix) || strings.Count(u.Reason, `nodepool "default": `) != 1 {
					t.Errorf("pod %s: reason %q", u.Pod.Name, u.Reason)
				}
			}
		})
	}
}

// A size-flexible RI's last units go to a smaller type of its family: the
// rounding opens the LP's patterns of the largest type and stops at the
// first that does not fit what is left, 8 of 40 units here, and the rest
// of the pods round onto m5a, cheaper at list; an m5.xlarge takes the
// last 8 units.
func TestCommitmentPoolsTopUpTheRoom(t *testing.T) {
	units := map[string]float64{"m5.large": 4, "m5.xlarge": 8, "m5.2xlarge": 16, "m5.4xlarge": 32}
	var types []*cloudprovider.InstanceType
	for _, it := range testCatalog(t) {
		takes, ok := units[it.Name]
		if !ok && !strings.HasPrefix(it.Name, "m5a.") {
			continue
		}
		cp := it.Copy()
		cp.Offerings = nil
		for _, o := range it.Offerings {
			if o.CapacityType != "on-demand" {
				continue
			}
			cp.Offerings = append(cp.Offerings, o)
			if ok {
				cp.Offerings = append(cp.Offerings, cloudprovider.Offering{Zone: o.Zone, CapacityType: o.CapacityType, Price: 1e-6, Available: true,
					Room: cloudprovider.Room{ID: "ri-1", Left: 40, Takes: takes}})
			}
		}
		types = append(types, cp)
	}
	snap := Snapshot{Pods: replicas(124, "web", "500m", "1Gi"), NodePools: []NodePool{{NodePool: mkNodePool("default"), InstanceTypes: types}}}
	plan := Solve(snap, Options{})
	used := 0.0
	for _, nc := range plan.NewNodeClaims {
		if nc.Offering.Room.ID == "ri-1" {
			used += nc.Offering.Room.Takes
		}
	}
	if used != 40 || len(plan.Unschedulable) > 0 {
		t.Errorf("the RI's nodes take %v of its 40 units, %d pods left, want all 40 and none\n%s", used, len(plan.Unschedulable), summary(plan))
	}
}
