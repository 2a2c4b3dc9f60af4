package scheduling

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	zoneA = "us-east-1a"
	zoneB = "us-east-1b"
	zoneC = "us-east-1c"
)

func policy(p corev1.NodeInclusionPolicy) *corev1.NodeInclusionPolicy {
	if p == "" {
		return nil
	}
	return &p
}

// zoneSpread spreads app=web over zones with maxSkew 1 and the given node
// inclusion policies ("" leaves a policy at its default).
func zoneSpread(affinityPolicy, taintsPolicy corev1.NodeInclusionPolicy) podOpt {
	return func(p *corev1.Pod) {
		spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "web"})(p)
		tsc := &p.Spec.TopologySpreadConstraints[len(p.Spec.TopologySpreadConstraints)-1]
		tsc.NodeAffinityPolicy = policy(affinityPolicy)
		tsc.NodeTaintsPolicy = policy(taintsPolicy)
	}
}

// fullNode is an existing node in zone with no room left, holding n pods
// labelled app=web.
func fullNode(name, zone string, labels map[string]string, taints []corev1.Taint, n int) *Node {
	l := map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: zone}
	for k, v := range labels {
		l[k] = v
	}
	return &Node{Name: name, Labels: l, Taints: taints,
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Pods:        replicas(n, name+"-web", "1", "1Gi", withLabels("app", "web"))}
}

func zonesOfPlan(p *Plan) map[string]int { return nodesLabelled(p, corev1.LabelTopologyZone) }

func wantZoneCounts(placed int, check func(z map[string]int) bool) func(*testing.T, *Plan) {
	return func(t *testing.T, p *Plan) {
		t.Helper()
		n := 0
		for _, nc := range p.NewNodeClaims {
			n += len(nc.Pods)
		}
		if z := zonesOfPlan(p); n != placed || !check(z) {
			t.Fatalf("want %d pods placed, zones as expected; got zones %v:\n%s", placed, z, summary(p))
		}
	}
}

// TestSpreadNodeInclusionPolicies checks topologySpreadConstraints'
// nodeAffinityPolicy (default Honor) and nodeTaintsPolicy (default Ignore)
// as kube-scheduler applies them: which nodes' pods count for the skew, and
// which domains are eligible for the minimum.
func TestSpreadNodeInclusionPolicies(t *testing.T) {
	const (
		honor  = corev1.NodeInclusionPolicyHonor
		ignore = corev1.NodeInclusionPolicyIgnore
	)
	teamWeb := func() *v1.NodePool {
		np := onDemandPool("web")
		np.Spec.Template.Labels = map[string]string{"team": "web"}
		return np
	}()
	dedicated := []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	zonePool := func(name string, taints []corev1.Taint, zones ...string) *v1.NodePool {
		np := onDemandPool(name, req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...))
		np.Spec.Template.Spec.Taints = taints
		return np
	}
	inZoneA := func(z map[string]int) bool { return z[zoneA] > 0 }
	notInZoneA := func(z map[string]int) bool { return z[zoneA] == 0 }
	twoAndTwo := func(z map[string]int) bool { return z[zoneA] == 2 && z[zoneB] == 2 }
	oneAndOne := func(z map[string]int) bool { return z[zoneA] == 1 && z[zoneB] == 1 }
	onlyZonesAB := nodeAffinityTerms([]corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zoneA, zoneB}}})

	// An existing node in zone a outside the pods' nodeSelector holds two
	// matching pods: they count only when the node affinity is ignored.
	affinityExisting := func(pol corev1.NodeInclusionPolicy, check func(map[string]int) bool) solveCase {
		return solveCase{pools: []*v1.NodePool{teamWeb},
			pods: replicas(2, "p", "500m", "512Mi", withLabels("app", "web"), withNodeSelector("team", "web"), zoneSpread(pol, "")),
			mod: func(s *Snapshot) {
				s.Nodes = []*Node{fullNode("other", zoneA, map[string]string{"team": "other"}, nil, 2)}
			},
			check: wantZoneCounts(2, check)}
	}
	// The pods may only use zones a and b; zone c, empty, is eligible for
	// the minimum only when the node affinity is ignored, and then allows
	// one pod per zone.
	affinityNew := func(pol corev1.NodeInclusionPolicy, placed int, check func(map[string]int) bool) solveCase {
		return solveCase{pools: []*v1.NodePool{onDemandPool("default")},
			pods:  replicas(4, "p", "500m", "512Mi", withLabels("app", "web"), onlyZonesAB, zoneSpread(pol, "")),
			check: wantZoneCounts(placed, check)}
	}
	// An existing node in zone a that the pods do not tolerate holds two
	// matching pods: they count unless the taints are honoured.
	taintsExisting := func(pol corev1.NodeInclusionPolicy, check func(map[string]int) bool) solveCase {
		return solveCase{pools: []*v1.NodePool{onDemandPool("default")},
			pods: replicas(2, "p", "500m", "512Mi", withLabels("app", "web"), zoneSpread("", pol)),
			mod: func(s *Snapshot) {
				s.Nodes = []*Node{fullNode("tainted", zoneA, nil, dedicated, 2)}
			},
			check: wantZoneCounts(2, check)}
	}
	// Zone c is only offered by a NodePool the pods do not tolerate: it is
	// eligible, and empty, unless the taints are honoured.
	taintsNew := func(pol corev1.NodeInclusionPolicy, placed int, check func(map[string]int) bool) solveCase {
		return solveCase{pools: []*v1.NodePool{zonePool("open", nil, zoneA, zoneB), zonePool("tainted", dedicated, zoneC)},
			pods:  replicas(4, "p", "500m", "512Mi", withLabels("app", "web"), zoneSpread("", pol)),
			check: wantZoneCounts(placed, check)}
	}
	// Zone d is no pool's, but an existing node is in it, full of other
	// pods: an eligible domain that stays empty, so one pod per zone.
	existingOnlyZone := solveCase{pools: []*v1.NodePool{zonePool("open", nil, zoneA, zoneB)},
		pods: replicas(4, "p", "500m", "512Mi", withLabels("app", "web"), zoneSpread("", "")),
		mod: func(s *Snapshot) {
			d := fullNode("d", "us-east-1d", nil, nil, 0)
			d.Pods = replicas(2, "other", "1", "1Gi")
			s.Nodes = []*Node{d}
		},
		check: wantZoneCounts(2, oneAndOne)}
	cases := map[string]solveCase{
		"a zone only an existing node is in":        existingOnlyZone,
		"nodeAffinityPolicy default, existing node": affinityExisting("", inZoneA),
		"nodeAffinityPolicy Honor, existing node":   affinityExisting(honor, inZoneA),
		"nodeAffinityPolicy Ignore, existing node":  affinityExisting(ignore, notInZoneA),
		"nodeAffinityPolicy default, new nodes":     affinityNew("", 4, twoAndTwo),
		"nodeAffinityPolicy Honor, new nodes":       affinityNew(honor, 4, twoAndTwo),
		"nodeAffinityPolicy Ignore, new nodes":      affinityNew(ignore, 2, oneAndOne),
		"nodeTaintsPolicy default, existing node":   taintsExisting("", notInZoneA),
		"nodeTaintsPolicy Ignore, existing node":    taintsExisting(ignore, notInZoneA),
		"nodeTaintsPolicy Honor, existing node":     taintsExisting(honor, inZoneA),
		"nodeTaintsPolicy default, new nodes":       taintsNew("", 2, oneAndOne),
		"nodeTaintsPolicy Ignore, new nodes":        taintsNew(ignore, 2, oneAndOne),
		"nodeTaintsPolicy Honor, new nodes":         taintsNew(honor, 4, twoAndTwo),
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var mods []func(*Snapshot)
			if tc.mod != nil {
				mods = append(mods, tc.mod)
			}
			tc.check(t, solve(t, tc.pools, tc.pods, mods...))
		})
	}
}

// dbNodes are two existing full nodes: zone a holds an app=db pod in
// namespace "legacy" with version v1, zone b one in namespace "data" with
// version v2.
func dbNodes(s *Snapshot) {
	a := fullNode("db-a", zoneA, nil, nil, 0)
	a.Pods = []*corev1.Pod{mkPod("db-a", "2", "1Gi", withLabels("app", "db", "version", "v1"), inNamespace("legacy"))}
	b := fullNode("db-b", zoneB, nil, nil, 0)
	b.Pods = []*corev1.Pod{mkPod("db-b", "2", "1Gi", withLabels("app", "db", "version", "v2"), inNamespace("data"))}
	s.Nodes = []*Node{a, b}
}

func inNamespace(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }

// affinityTerm sets one required pod affinity (or anti-affinity) term on
// zones, letting edit fill in namespaces and label keys.
func affinityTerm(anti bool, sel *metav1.LabelSelector, edit func(*corev1.PodAffinityTerm)) podOpt {
	return func(p *corev1.Pod) {
		term := corev1.PodAffinityTerm{TopologyKey: corev1.LabelTopologyZone, LabelSelector: sel}
		edit(&term)
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		if anti {
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
		} else {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
		}
	}
}

// TestAffinityTermNamespacesAndLabelKeys checks which pods a pod affinity
// term considers: the namespaces it lists plus those its namespaceSelector
// matches, and its selector narrowed by matchLabelKeys and
// mismatchLabelKeys, as kube-scheduler and kube-apiserver do.
func TestAffinityTermNamespacesAndLabelKeys(t *testing.T) {
	db := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	anyApp := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}
	namespaces := func(s *Snapshot) {
		s.Namespaces = map[string]map[string]string{"data": {"team": "data"}, "legacy": {"team": "legacy"}, "default": {}}
	}
	nsSel := func(ml map[string]string) func(*corev1.PodAffinityTerm) {
		return func(t *corev1.PodAffinityTerm) { t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: ml} }
	}
	zoneIs := func(zone string) func(*testing.T, *Plan) {
		return func(t *testing.T, p *Plan) {
			t.Helper()
			if z := zonesOfPlan(p); len(p.Unschedulable) != 0 || z[zone] != 1 {
				t.Fatalf("want the pod in %s, got zones %v:\n%s", zone, z, summary(p))
			}
		}
	}
	inZones := func(zones ...string) podOpt {
		return nodeAffinityTerms([]corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones}})
	}
	both := func(mods ...func(*Snapshot)) func(*Snapshot) {
		return func(s *Snapshot) {
			for _, m := range mods {
				m(s)
			}
		}
	}
	web := func(opts ...podOpt) []*corev1.Pod {
		return []*corev1.Pod{mkPod("web", "500m", "512Mi", append([]podOpt{withLabels("app", "web", "version", "v2")}, opts...)...)}
	}
	od := []*v1.NodePool{onDemandPool("default")}
	cases := []solveCase{
		{name: "namespaceSelector picks the namespace by its labels", pools: od,
			pods: web(affinityTerm(false, db, nsSel(map[string]string{"team": "data"}))), mod: both(namespaces, dbNodes), check: zoneIs(zoneB)},
		{name: "namespaceSelector on the name label needs no Namespace objects", pools: od,
			pods: web(affinityTerm(false, db, nsSel(map[string]string{corev1.LabelMetadataName: "legacy"}))), mod: dbNodes, check: zoneIs(zoneA)},
		{name: "namespaceSelector matching no namespace matches no pod", pools: od,
			pods: web(affinityTerm(false, db, nsSel(map[string]string{"team": "none"}))), mod: both(namespaces, dbNodes), check: wantUnschedulable(1, "no pod matches")},
		{name: "namespaces listed and selected are a union", pools: od,
			pods: web(affinityTerm(true, db, func(t *corev1.PodAffinityTerm) {
				t.Namespaces = []string{"legacy"}
				t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "data"}}
			})), mod: both(namespaces, dbNodes), check: zoneIs(zoneC)},
		{name: "an empty namespaceSelector means every namespace", pools: od,
			pods: web(affinityTerm(true, db, nsSel(map[string]string{}))), mod: dbNodes, check: zoneIs(zoneC)},
		{name: "anti-affinity with a namespaceSelector avoids that namespace's pods only", pools: od,
			pods: web(inZones(zoneB, zoneC), affinityTerm(true, db, nsSel(map[string]string{"team": "data"}))), mod: both(namespaces, dbNodes), check: zoneIs(zoneC)},
		{name: "matchLabelKeys narrows affinity to the pod's own version", pools: od,
			pods: web(affinityTerm(false, db, func(t *corev1.PodAffinityTerm) {
				t.NamespaceSelector = &metav1.LabelSelector{}
				t.MatchLabelKeys = []string{"version"}
			})), mod: dbNodes, check: zoneIs(zoneB)},
		{name: "matchLabelKeys already merged by the API server is not added twice", pools: od,
			pods: web(affinityTerm(false, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "version", Operator: metav1.LabelSelectorOpIn, Values: []string{"v2"}}}}, func(t *corev1.PodAffinityTerm) {
				t.NamespaceSelector = &metav1.LabelSelector{}
				t.MatchLabelKeys = []string{"version"}
			})), mod: dbNodes, check: zoneIs(zoneB)},
		{name: "mismatchLabelKeys keeps anti-affinity to other versions only", pools: od,
			pods: web(inZones(zoneA, zoneB), affinityTerm(true, anyApp, func(t *corev1.PodAffinityTerm) {
				t.NamespaceSelector = &metav1.LabelSelector{}
				t.MismatchLabelKeys = []string{"version"}
			})), mod: dbNodes, check: zoneIs(zoneB)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mods []func(*Snapshot)
			if tc.mod != nil {
				mods = append(mods, tc.mod)
			}
			tc.check(t, solve(t, tc.pools, tc.pods, mods...))
		})
	}
}

// TestWithLabelKeysIsIdempotent: pods from the API carry the merged
// requirements already; merging again must not change the selector, or
// they would count apart from the same workload's pods read elsewhere.
func TestWithLabelKeysIsIdempotent(t *testing.T) {
	pod := mkPod("web", "1", "1Gi", withLabels("app", "web", "version", "v2", "tenant", "t1"),
		affinityTerm(true, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, func(t *corev1.PodAffinityTerm) {
			t.MatchLabelKeys = []string{"version", "missing"}
			t.MismatchLabelKeys = []string{"tenant"}
		}))
	once := withLabelKeys(pod)
	twice := withLabelKeys(once)
	got := once.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector
	again := twice.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector
	want := []metav1.LabelSelectorRequirement{{Key: "version", Operator: metav1.LabelSelectorOpIn, Values: []string{"v2"}}, {Key: "tenant", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"t1"}}}
	if !equality.Semantic.DeepEqual(got.MatchExpressions, want) || !equality.Semantic.DeepEqual(again, got) {
		t.Fatalf("merged %v, again %v; want %v", got.MatchExpressions, again.MatchExpressions, want)
	}
	if orig := pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector; len(orig.MatchExpressions) != 0 {
		t.Fatalf("the pod itself was changed: %v", orig.MatchExpressions)
	}
}
