package scheduling

import (
	"fmt"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
)

// TestPlansHonourConstraints re-checks every placement of Karpenter's
// diverse benchmark against the constraints, independently of the solver's
// own bookkeeping, so that its later passes (LP rounding, squeeze, merge)
// cannot quietly break one. Every launch option of a NodeClaim must hold its
// pods and the DaemonSets that would run on that type, and run every pod:
// the cloud may launch any of them. To give that teeth, the second workload
// adds DaemonSets, one of them on a local-SSD label a third of the types
// carry, and makes some generic pods require or refuse that label.
//
// The zone-spread check is stricter than kube-scheduler: it wants every
// pod carrying a spread's label balanced, the hostname-spread pods that
// the zone spread's selector also matches included, though only the zone
// spread's own pods are bound by it. The solver balances those too when it
// picks a new node's zone, but not when they join a node whose zone is
// decided, so with DaemonSets changing the packing the balance can be off
// by a pod or two, as it was before per-type DaemonSet overhead. The check
// runs on the benchmark as it is.
func TestPlansHonourConstraints(t *testing.T) {
	counts := []int{100, 1000}
	if !testing.Short() {
		counts = append(counts, 5000)
	}
	for _, withDaemons := range []bool{false, true} {
		for _, count := range counts {
			t.Run(fmt.Sprintf("daemonsets=%t/pods=%d", withDaemons, count), func(t *testing.T) {
				start := time.Now()
				defer func() { t.Logf("solved and checked in %s", time.Since(start).Round(time.Millisecond)) }()
				snap, pool := diverseSnapshot(count, withDaemons)
				plan := Solve(snap, Options{})
				if len(plan.Unschedulable) > 0 {
					t.Fatalf("%d unschedulable", len(plan.Unschedulable))
				}
				checkEveryOption(t, plan, pool, snap.DaemonSets)
				checkDiverseConstraints(t, plan, count, !withDaemons)
			})
		}
	}
}

// diverseSnapshot is the benchmark's workload, with DaemonSets and the
// local-SSD label if asked.
func diverseSnapshot(count int, withDaemons bool) (Snapshot, *v1.NodePool) {
	pool := mkNodePool("default")
	snap := Snapshot{Pods: diversePods(count), NodePools: []NodePool{{NodePool: pool, InstanceTypes: benchInstanceTypes()}}}
	if !withDaemons {
		return snap, pool
	}
	for i, p := range snap.Pods {
		switch i % 20 {
		case 0:
			p.Spec.NodeSelector = map[string]string{localSSD: "true"}
		case 10:
			nodeAffinityTerms([]corev1.NodeSelectorRequirement{{Key: localSSD, Operator: corev1.NodeSelectorOpDoesNotExist}})(p)
		}
	}
	for i, it := range snap.NodePools[0].InstanceTypes {
		if i%3 == 2 {
			it.Labels[localSSD] = "true"
		}
	}
	snap.DaemonSets = []*corev1.Pod{
		mkPod("kube-proxy", "100m", "128Mi", withNodeSelector(corev1.LabelOSStable, "linux")),
		mkPod("ssd-agent", "600m", "512Mi", withNodeSelector(localSSD, "true")),
		mkPod("arm-only", "1", "1Gi", withNodeSelector(corev1.LabelArchStable, "arm64")),
	}
	return snap, pool
}

// checkDiverseConstraints checks the benchmark's constraints on the plan:
// every pod placed, zonal pods on one-zone nodes, nginx anti-affinity and
// hostname spread one per node, zone affinity in one zone and, if asked,
// every zone spread balanced.
func checkDiverseConstraints(t *testing.T, plan *Plan, count int, balanced bool) {
	t.Helper()
	placed := 0
	zoneOf := map[*corev1.Pod]string{}
	for _, nc := range plan.NewNodeClaims {
		zones := nc.Requirements[corev1.LabelTopologyZone].Values()
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
		if balanced && max-min > 1 {
			t.Errorf("zone spread of %s skewed: %v", l, zs)
		}
	}
	for a, zs := range affinityZones {
		if len(zs) != 1 {
			t.Errorf("zone affinity group %s in zones %v", a, zs)
		}
	}
}

const localSSD = "example.com/local-ssd"

// checkEveryOption checks, with kube-scheduler's own matchers, that every
// launch option of every NodeClaim has an offering where the NodeClaim may
// launch, room for its pods plus the DaemonSets that would run on that
// type, and labels every pod accepts.
func checkEveryOption(t *testing.T, plan *Plan, pool *v1.NodePool, daemons []*corev1.Pod) {
	t.Helper()
	bad := 0
	for _, nc := range plan.NewNodeClaims {
		zones, cts := nc.Requirements[corev1.LabelTopologyZone], nc.Requirements[v1.LabelCapacityType]
		settled := map[string]string{}
		for _, r := range []*requirements.Requirement{zones, cts} {
			if vals := r.Values(); len(vals) == 1 {
				settled[r.Key] = vals[0]
			}
		}
		pods := podsRequest(nc.Pods)
		for _, it := range nc.InstanceTypes {
			if bad > 10 {
				t.Fatal("too many errors")
			}
			offered := false
			for _, o := range it.Offerings {
				offered = offered || (o.Available && zones.Has(o.Zone) && cts.Has(o.CapacityType))
			}
			if !offered {
				bad++
				t.Errorf("option %s has no offering in zones %s, capacity types %s", it.Name, zones, cts)
			}
			node := syntheticNode(pool, it, settled)
			need := podsRequest(append(append([]*corev1.Pod{}, nc.Pods...), daemonsOn(daemons, node)...))
			if !fitsIn(need, it.Allocatable) {
				bad++
				t.Errorf("option %s (allocatable %s) has no room for its pods (%s) and DaemonSets: %s", it.Name, resources.ListString(it.Allocatable), resources.ListString(pods), resources.ListString(need))
			}
			for _, p := range nc.Pods {
				if !podRunsOn(p, node) {
					bad++
					t.Errorf("pod %s cannot run on option %s (labels %v)", p.Name, it.Name, node.Labels)
				}
			}
		}
	}
}

// TestKarpenterWorkloadHonoursConstraints checks plans of the benchmark's
// workload as Karpenter builds it (karpenterPods), whose selectors count
// other pods than their own. Spread there is a rule about the moment each
// pod is placed, which a final plan cannot show; what the final plan can
// show is checked: every pod placed, every launch option valid, one nginx
// pod per node, zone-constrained pods on single-zone nodes, and every zone
// affinity satisfied by a pod of the target label in the same zone.
func TestKarpenterWorkloadHonoursConstraints(t *testing.T) {
	for _, count := range []int{100, 1000} {
		t.Run(fmt.Sprintf("pods=%d", count), func(t *testing.T) {
			pool := mkNodePool("default")
			snap := Snapshot{Pods: karpenterPods(count), NodePools: []NodePool{{NodePool: pool, InstanceTypes: benchInstanceTypes()}}}
			plan := Solve(snap, Options{})
			if len(plan.Unschedulable) > 0 {
				t.Fatalf("%d unschedulable, e.g. %s: %s", len(plan.Unschedulable), plan.Unschedulable[0].Pod.Name, plan.Unschedulable[0].Reason)
			}
			checkEveryOption(t, plan, pool, nil)
			placed := 0
			labelsInZone := map[string]map[string]bool{}
			type want struct{ pod, zone, target string }
			var affinities []want
			for _, nc := range plan.NewNodeClaims {
				zones := nc.Requirements[corev1.LabelTopologyZone].Values()
				nginx := 0
				for _, p := range nc.Pods {
					placed++
					if p.Labels["app"] == "nginx" {
						nginx++
					}
					zonal := p.Spec.Affinity != nil && p.Spec.Affinity.PodAffinity != nil
					for _, tsc := range p.Spec.TopologySpreadConstraints {
						zonal = zonal || tsc.TopologyKey == corev1.LabelTopologyZone
					}
					if zonal && len(zones) != 1 {
						t.Errorf("pod %s with zone constraints on a node with zones %v", p.Name, zones)
						continue
					}
					if len(zones) != 1 {
						continue
					}
					if a := p.Labels["my-affinity"]; a != "" {
						if labelsInZone[zones[0]] == nil {
							labelsInZone[zones[0]] = map[string]bool{}
						}
						labelsInZone[zones[0]][a] = true
					}
					if zonal && p.Spec.Affinity != nil && p.Spec.Affinity.PodAffinity != nil {
						target := p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels["my-affinity"]
						affinities = append(affinities, want{p.Name, zones[0], target})
					}
				}
				if nginx > 1 {
					t.Errorf("%d anti-affine nginx pods share a node", nginx)
				}
			}
			if placed != count {
				t.Fatalf("%d of %d pods placed", placed, count)
			}
			for _, a := range affinities {
				if !labelsInZone[a.zone][a.target] {
					t.Errorf("pod %s in %s requires a pod with my-affinity=%s there; none is", a.pod, a.zone, a.target)
				}
			}
		})
	}
}
