package scheduling

import (
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func zonesOf(nc *NewNodeClaim) []string {
	return nc.Requirements[corev1.LabelTopologyZone].Values()
}

// wantZones expects the first NodeClaim to allow exactly zones.
func wantZones(zones ...string) func(*testing.T, *Plan) {
	return func(t *testing.T, p *Plan) {
		t.Helper()
		if z := zonesOf(p.NewNodeClaims[0]); strings.Join(z, ",") != strings.Join(zones, ",") {
			t.Fatalf("zones %v, want %v", z, zones)
		}
	}
}

func preferredAntiAffinity(key string, labels map[string]string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}},
		}}}}
	}
}

func preferredAffinity(key string, labels map[string]string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}},
		}}}}
	}
}

func softSpread(key string, labels map[string]string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		})
	}
}

// TestPreferencePolicy runs each preference under both policies: Respect
// honours it while it can, Ignore never sees it. PreferNoSchedule taints
// are avoided under both, as in Karpenter.
func TestPreferencePolicy(t *testing.T) {
	od := onDemandPool("default")
	taintedPool := func(name string, weight int32) *v1.NodePool {
		np := onDemandPool(name)
		np.Spec.Weight = &weight
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "batch", Effect: corev1.TaintEffectPreferNoSchedule}}
		return np
	}
	// A full node in us-east-1c runs the leader a follower prefers to join.
	leaderNode := func(s *Snapshot) {
		leader := mkPod("leader", "3500m", "1Gi", withLabels("app", "leader"))
		leader.Spec.NodeName = "full"
		s.Nodes = []*Node{{Name: "full", Labels: map[string]string{corev1.LabelHostname: "full", corev1.LabelTopologyZone: "us-east-1c"},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")},
			Pods:        []*corev1.Pod{leader}}}
	}
	cases := []struct {
		name    string
		pools   []*v1.NodePool
		pods    []*corev1.Pod
		mod     func(*Snapshot)
		respect func(*testing.T, *Plan)
		ignore  func(*testing.T, *Plan)
	}{
		{name: "preferred node affinity", pools: []*v1.NodePool{od}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi", preferredZone("us-east-1b"))},
			respect: wantZones("us-east-1b"), ignore: wantZones("us-east-1a", "us-east-1b", "us-east-1c")},
		{name: "preferred pod anti-affinity", pools: []*v1.NodePool{od},
			pods:    replicas(3, "a", "500m", "512Mi", withLabels("app", "a"), preferredAntiAffinity(corev1.LabelHostname, map[string]string{"app": "a"})),
			respect: wantNodes(3), ignore: wantNodes(1)},
		{name: "ScheduleAnyway spread", pools: []*v1.NodePool{od},
			pods: replicas(3, "s", "500m", "512Mi", withLabels("app", "s"), softSpread(corev1.LabelTopologyZone, map[string]string{"app": "s"})),
			respect: func(t *testing.T, p *Plan) {
				zones := map[string]bool{}
				for _, nc := range p.NewNodeClaims {
					if z := zonesOf(nc); len(z) == 1 {
						zones[z[0]] = true
					}
				}
				if len(zones) != 3 {
					t.Fatalf("want one node per zone:\n%s", summary(p))
				}
			},
			ignore: wantNodes(1)},
		{name: "preferred pod affinity", pools: []*v1.NodePool{od}, mod: leaderNode,
			pods:    []*corev1.Pod{mkPod("follower", "1", "1Gi", preferredAffinity(corev1.LabelTopologyZone, map[string]string{"app": "leader"}))},
			respect: wantZones("us-east-1c"), ignore: wantZones("us-east-1a", "us-east-1b", "us-east-1c")},
		{name: "a PreferNoSchedule pool is avoided while another fits", pools: []*v1.NodePool{taintedPool("tainted", 50), od},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			respect: func(t *testing.T, p *Plan) {
				if p.NewNodeClaims[0].NodePool != "default" {
					t.Fatalf("\n%s", summary(p))
				}
			}},
		{name: "a PreferNoSchedule pool is used when nothing else fits", pools: []*v1.NodePool{taintedPool("tainted", 50)},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			respect: func(t *testing.T, p *Plan) {
				if len(p.NewNodeClaims) != 1 || p.NewNodeClaims[0].NodePool != "tainted" {
					t.Fatalf("\n%s", summary(p))
				}
			}},
	}
	for _, tc := range cases {
		for _, policy := range []PreferencePolicy{PreferencePolicyRespect, PreferencePolicyIgnore} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				var mods []func(*Snapshot)
				if tc.mod != nil {
					mods = append(mods, tc.mod)
				}
				plan := solveWith(t, Options{PreferencePolicy: policy}, tc.pools, tc.pods, mods...)
				check := tc.respect
				if policy == PreferencePolicyIgnore && tc.ignore != nil {
					check = tc.ignore
				}
				if len(plan.NewNodeClaims) == 0 {
					t.Fatalf("no NodeClaims:\n%s", summary(plan))
				}
				check(t, plan)
			})
		}
	}
}

func withMinValues(r v1.NodeSelectorRequirementWithMinValues, n int) v1.NodeSelectorRequirementWithMinValues {
	r.MinValues = &n
	return r
}

const familyKey = "karpenter.k8s.aws/instance-family"

// distinct counts the values of key among a NodeClaim's options.
func distinct(nc *NewNodeClaim, key string) int {
	seen := map[string]bool{}
	for _, it := range nc.InstanceTypes {
		seen[it.Labels[key]] = true
	}
	return len(seen)
}

// launched expects one NodeClaim from pool whose options carry at least
// families instance families, relaxed or not, its requirement's minValues
// as given (0: unchanged).
func launched(pool string, families int, relaxed bool, key string, minValues int) func(*testing.T, *Plan) {
	return func(t *testing.T, p *Plan) {
		t.Helper()
		if len(p.NewNodeClaims) != 1 || len(p.Unschedulable) != 0 {
			t.Fatalf("want one NodeClaim:\n%s", summary(p))
		}
		nc := p.NewNodeClaims[0]
		if nc.NodePool != pool {
			t.Fatalf("from %s, want %s", nc.NodePool, pool)
		}
		if got := distinct(nc, familyKey); got < families {
			t.Fatalf("%d families among %d options, want %d", got, len(nc.InstanceTypes), families)
		}
		if nc.MinValuesRelaxed != relaxed {
			t.Fatalf("relaxed=%v, want %v", nc.MinValuesRelaxed, relaxed)
		}
		if minValues > 0 {
			r := nc.Requirements[key]
			if r == nil || r.MinValues == nil || *r.MinValues != minValues {
				t.Fatalf("requirement %s on the NodeClaim: %v", key, r)
			}
		}
	}
}

// TestMinValuesPolicy runs minValues cases under both policies: Strict
// never launches a NodeClaim whose options miss a minValues, and its pods
// try the next NodePool; BestEffort launches it, minValues lowered and the
// NodeClaim marked.
func TestMinValuesPolicy(t *testing.T) {
	anyFamily := withMinValues(req(familyKey, corev1.NodeSelectorOpExists), 5)
	threeFamilies := withMinValues(req(familyKey, corev1.NodeSelectorOpIn, "c5", "m5", "r5"), 3)
	// The pod allows two of the pool's three families.
	twoFamilies := func(p *corev1.Pod) {
		nodeAffinityTerms([]corev1.NodeSelectorRequirement{{Key: familyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"c5", "m5"}}})(p)
	}
	weighted := func(np *v1.NodePool, w int32) *v1.NodePool {
		np.Spec.Weight = &w
		return np
	}
	bothCapacityTypes := mkNodePool("mixed", req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"),
		withMinValues(req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand"), 2))
	twoZones := onDemandPool("zonal", withMinValues(req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b", "us-east-1c"), 2))
	cases := []struct {
		name       string
		opts       Options
		pools      []*v1.NodePool
		pods       []*corev1.Pod
		strict     func(*testing.T, *Plan)
		bestEffort func(*testing.T, *Plan)
	}{
		{name: "met: options span minValues families, past the price band if need be", pools: []*v1.NodePool{onDemandPool("flex", anyFamily)},
			pods:   []*corev1.Pod{mkPod("p", "1", "1Gi")},
			strict: launched("flex", 5, false, familyKey, 5), bestEffort: launched("flex", 5, false, familyKey, 5)},
		{name: "the pod's own affinity leaves too few families", pools: []*v1.NodePool{onDemandPool("flex", threeFamilies)},
			pods:       []*corev1.Pod{mkPod("p", "1", "1Gi", twoFamilies)},
			strict:     wantUnschedulable(1, `nodepool "flex": minValues 3 of requirement "karpenter.k8s.aws/instance-family" cannot be met: the instance types that can hold the pods have only 2 value(s) (MIN_VALUES_POLICY=Strict`),
			bestEffort: launched("flex", 2, true, familyKey, 2)},
		{name: "the next NodePool is tried", pools: []*v1.NodePool{weighted(onDemandPool("flex", threeFamilies), 10), onDemandPool("fallback")},
			pods:       []*corev1.Pod{mkPod("p", "1", "1Gi", twoFamilies)},
			strict:     launched("fallback", 1, false, "", 0),
			bestEffort: launched("flex", 2, true, familyKey, 2)},
		{name: "truncated to the cap on options", opts: Options{MaxInstanceTypes: 3}, pools: []*v1.NodePool{onDemandPool("flex", anyFamily)},
			pods:       []*corev1.Pod{mkPod("p", "1", "1Gi")},
			strict:     wantUnschedulable(1, `minValues 5 of requirement "karpenter.k8s.aws/instance-family" cannot be met within the 3 instance types a NodeClaim may offer: they carry only 3 value(s)`),
			bestEffort: launched("flex", 3, true, familyKey, 3)},
		{name: "the cap holds with minValues", opts: Options{MaxInstanceTypes: 4}, pools: []*v1.NodePool{onDemandPool("flex", withMinValues(req(familyKey, corev1.NodeSelectorOpExists), 4))},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			strict: func(t *testing.T, p *Plan) {
				launched("flex", 4, false, familyKey, 4)(t, p)
				if n := len(p.NewNodeClaims[0].InstanceTypes); n != 4 {
					t.Fatalf("%d options, cap 4", n)
				}
			}},
		{name: "capacity types come from offerings", pools: []*v1.NodePool{bothCapacityTypes}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			strict: func(t *testing.T, p *Plan) {
				launched("mixed", 1, false, v1.LabelCapacityType, 2)(t, p)
				if cts := p.NewNodeClaims[0].Requirements[v1.LabelCapacityType].Values(); len(cts) != 2 {
					t.Fatalf("capacity types %v", cts)
				}
			}},
		{name: "a zone-pinned pod leaves one zone", pools: []*v1.NodePool{twoZones},
			pods:       []*corev1.Pod{mkPod("p", "1", "1Gi", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: "us-east-1a"} })},
			strict:     wantUnschedulable(1, `minValues 2 of requirement "topology.kubernetes.io/zone" cannot be met`),
			bestEffort: launched("zonal", 1, true, corev1.LabelTopologyZone, 1)},
	}
	for _, tc := range cases {
		for _, policy := range []MinValuesPolicy{MinValuesPolicyStrict, MinValuesPolicyBestEffort} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				opts := tc.opts
				opts.MinValuesPolicy = policy
				plan := solveWith(t, opts, tc.pools, tc.pods)
				check := tc.strict
				if policy == MinValuesPolicyBestEffort && tc.bestEffort != nil {
					check = tc.bestEffort
				}
				check(t, plan)
				for _, nc := range plan.NewNodeClaims {
					if max := opts.withDefaults().MaxInstanceTypes; len(nc.InstanceTypes) > max {
						t.Fatalf("%d options, cap %d", len(nc.InstanceTypes), max)
					}
				}
			})
		}
	}
}

// A removal whose displaced pods need a NodeClaim that Strict minValues
// forbids must say so, never look like the pods fit.
func TestRemovalNeedsMinValues(t *testing.T) {
	np := onDemandPool("flex", withMinValues(req(familyKey, corev1.NodeSelectorOpExists), 5))
	pod := mkPod("p", "1", "1Gi")
	pod.Spec.NodeName = "old"
	snap := Snapshot{NodePools: []NodePool{{NodePool: np, InstanceTypes: testCatalog(t)}},
		Nodes: []*Node{{Name: "old", NodePool: "flex", Labels: map[string]string{corev1.LabelHostname: "old", v1.LabelNodePool: "flex"},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")},
			Pods:        []*corev1.Pod{pod}}}}
	for _, tc := range []struct {
		policy       MinValuesPolicy
		replacements int
		reason       string
	}{
		{policy: MinValuesPolicyStrict, reason: "cannot be met within the 3 instance types"},
		{policy: MinValuesPolicyBestEffort, replacements: 1},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			r, err := NewCluster(snap, Options{MaxInstanceTypes: 3, MinValuesPolicy: tc.policy}).TryRemove("old")
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Replacements) != tc.replacements {
				t.Fatalf("%d replacements", len(r.Replacements))
			}
			if tc.reason == "" {
				if len(r.Unschedulable) != 0 {
					t.Fatalf("unschedulable %v", r.Unschedulable)
				}
				return
			}
			if len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, tc.reason) {
				t.Fatalf("unschedulable %v, want one with %q", r.Unschedulable, tc.reason)
			}
		})
	}
}
