package scheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPlansHonourConstraints re-checks every placement of Karpenter's
// diverse benchmark against the constraints, independently of the solver's
// own bookkeeping, so that its later passes (LP rounding, squeeze, merge)
// cannot quietly break one.
func TestPlansHonourConstraints(t *testing.T) {
	for _, count := range []int{100, 1000} {
		t.Run(fmt.Sprintf("pods=%d", count), func(t *testing.T) {
			pods := diversePods(count)
			snap := Snapshot{Pods: pods, NodePools: []NodePool{{NodePool: mkNodePool("default"), InstanceTypes: benchInstanceTypes()}}}
			plan := Solve(snap, Options{})
			if len(plan.Unschedulable) > 0 {
				t.Fatalf("%d unschedulable", len(plan.Unschedulable))
			}
			placed := 0
			zoneOf := map[*corev1.Pod]string{}
			for _, nc := range plan.NewNodeClaims {
				zones := nc.Requirements[corev1.LabelTopologyZone].Values()
				fits := false
				for _, it := range nc.InstanceTypes {
					if nc.Requests.Fits(FromResourceList(it.Allocatable)) {
						fits = true
					}
				}
				if !fits {
					t.Errorf("nodeclaim requests %s fit none of its %d options", nc.Requests, len(nc.InstanceTypes))
				}
				perLetter := map[string]int{}
				nginx := 0
				for _, p := range nc.Pods {
					placed++
					// A zone spread's selector (my-label) also matches the
					// hostname-spread pods, which then count per zone too.
					zonal := p.Labels["my-affinity"] != "" || p.Labels["my-label"] != ""
					for _, tsc := range p.Spec.TopologySpreadConstraints {
						zonal = zonal || tsc.TopologyKey == corev1.LabelTopologyZone
					}
					if zonal {
						if len(zones) != 1 {
							t.Errorf("pod %s with zone constraints on a node with zones %v", p.Name, zones)
						}
					}
					if len(zones) == 1 {
						zoneOf[p] = zones[0]
					}
					for _, tsc := range p.Spec.TopologySpreadConstraints {
						if tsc.TopologyKey == corev1.LabelHostname {
							perLetter[p.Labels["my-label"]]++
						}
					}
					if p.Labels["app"] == "nginx" {
						nginx++
					}
				}
				if nginx > 1 {
					t.Errorf("%d anti-affine nginx pods share a node", nginx)
				}
				for l, n := range perLetter {
					if n > 1 {
						t.Errorf("%d hostname-spread pods of %s share a node", n, l)
					}
				}
			}
			if placed != count {
				t.Fatalf("%d of %d pods placed", placed, count)
			}
			spreadZones := map[string]map[string]int{}
			affinityZones := map[string]map[string]bool{}
			for p, z := range zoneOf {
				if l := p.Labels["my-label"]; l != "" {
					if spreadZones[l] == nil {
						spreadZones[l] = map[string]int{}
					}
					spreadZones[l][z]++
				}
				if a := p.Labels["my-affinity"]; a != "" {
					if affinityZones[a] == nil {
						affinityZones[a] = map[string]bool{}
					}
					affinityZones[a][z] = true
				}
			}
			for l, zs := range spreadZones {
				min, max := 1<<30, 0
				for _, z := range []string{"test-zone-1", "test-zone-2", "test-zone-3"} {
					if zs[z] < min {
						min = zs[z]
					}
					if zs[z] > max {
						max = zs[z]
					}
				}
				if max-min > 1 {
					t.Errorf("zone spread of %s skewed: %v", l, zs)
				}
			}
			for a, zs := range affinityZones {
				if len(zs) != 1 {
					t.Errorf("zone affinity group %s in zones %v", a, zs)
				}
			}
		})
	}
}
