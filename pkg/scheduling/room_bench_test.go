package scheduling

import (
	"fmt"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

// BenchmarkCommitments plans Karpenter's benchmark workload (5,000 pods)
// on its 400 synthetic types at list prices, and again with commitments:
// an RI of 50 instances of fake-it-4 and a plan of $20/h at 70% of list
// on every type, offered as rooms in each zone, as the AWS provider
// offers them. Issue 38 asks that planning with commitments take at most
// 1.5 times the time without.
func BenchmarkCommitments(b *testing.B) {
	plain := benchInstanceTypes()
	var committed []*cloudprovider.InstanceType
	for _, it := range plain {
		cp := it.Copy()
		for _, o := range it.Offerings {
			if o.CapacityType != "on-demand" {
				continue
			}
			if it.Name == "fake-it-4" {
				cp.Offerings = append(cp.Offerings, cloudprovider.Offering{Zone: o.Zone, CapacityType: o.CapacityType, Price: 0, Available: true,
					Room: cloudprovider.Room{ID: "ri-1", Left: 50, Takes: 1}})
			}
			rate := 0.7 * o.Price
			cp.Offerings = append(cp.Offerings, cloudprovider.Offering{Zone: o.Zone, CapacityType: o.CapacityType, Price: rate, Available: true,
				Room: cloudprovider.Room{ID: "sp-1", Left: 20, Takes: rate}})
		}
		committed = append(committed, cp)
	}
	for _, tc := range []struct {
		name  string
		types []*cloudprovider.InstanceType
	}{{"list prices", plain}, {"commitments", committed}} {
		b.Run(fmt.Sprintf("%s/pods=5000", tc.name), func(b *testing.B) {
			snap := Snapshot{Pods: karpenterPods(5000), NodePools: []NodePool{{NodePool: mkNodePool("default"), InstanceTypes: tc.types}}}
			var plan *Plan
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				plan = Solve(snap, Options{})
			}
			b.StopTimer()
			if len(plan.Unschedulable) > 0 {
				b.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
			}
			b.ReportMetric(plan.TotalPrice(), "$/h")
			b.ReportMetric(float64(len(plan.NewNodeClaims)), "nodes")
		})
	}
}
