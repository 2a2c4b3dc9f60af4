package scheduling

import (
	"fmt"
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// storage is a cluster's storage objects for a volume test.
type storage struct {
	claims  []*corev1.PersistentVolumeClaim
	pvs     []*corev1.PersistentVolume
	classes []*storagev1.StorageClass
}

// zonalDisk adds an EBS PV in zone and a claim bound to it.
func (st *storage) zonalDisk(claim, zone string) {
	st.pvs = append(st.pvs, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + claim}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: volumes.EBSDriver, VolumeHandle: "vol-" + claim}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}},
	}})
	st.claims = append(st.claims, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + claim}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
}

// unbound adds a claim of a class that binds in mode, allowed in zones.
func (st *storage) unbound(claim string, mode storagev1.VolumeBindingMode, zones ...string) {
	class := claim + "-class"
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: volumes.EBSDriver, VolumeBindingMode: &mode}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: volumes.EBSZoneKey, Values: zones}}}}
	}
	st.classes = append(st.classes, sc)
	st.claims = append(st.claims, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}})
}

// apply resolves the snapshot's pods, pending and on nodes, as pkg/state does.
func (st *storage) apply(snap *Snapshot) {
	ix := volumes.NewIndex(st.claims, st.pvs, st.classes)
	snap.Volumes = map[string]volumes.Usage{}
	snap.Pods = ix.Apply(snap.Pods, snap.Volumes)
	for _, n := range snap.Nodes {
		n.Pods = ix.Apply(n.Pods, snap.Volumes)
	}
}

func withClaims(claims ...string) podOpt {
	return func(p *corev1.Pod) {
		for i, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i),
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		}
	}
}

// zoneNode is an existing node in zone with room for a lot, EBS attach
// limit ebs (-1 for none), running pods.
func zoneNode(name, zone string, ebs int, pods ...*corev1.Pod) *Node {
	n := &Node{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: zone, corev1.LabelArchStable: "amd64",
		corev1.LabelOSStable: "linux", v1.LabelCapacityType: "on-demand"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}}
	if ebs >= 0 {
		n.AttachLimits = map[string]int{volumes.EBSDriver: ebs}
	}
	for _, p := range pods {
		p.Spec.NodeName = name
		n.Pods = append(n.Pods, p)
	}
	return n
}

// wantNewNodeIn wants every pod on one new node, in zone, none on an
// existing node.
func wantNewNodeIn(zone string) func(*testing.T, *Plan) {
	return func(t *testing.T, p *Plan) {
		t.Helper()
		if len(p.Existing) != 0 {
			t.Fatalf("placed on an existing node: %v", p.Existing)
		}
		wantNodes(1)(t, p)
		if z := strings.Join(zonesOf(p.NewNodeClaims[0]), ","); z != zone {
			t.Fatalf("zones %s, want %s", z, zone)
		}
	}
}

func TestSolveVolumes(t *testing.T) {
	od := onDemandPool("default")
	cases := []struct {
		name    string
		pools   []*v1.NodePool
		storage func(*storage)
		pods    []*corev1.Pod
		nodes   func() []*Node
		check   func(t *testing.T, p *Plan)
	}{
		{name: "the zone of a bound claim's PV node affinity",
			storage: func(st *storage) { st.zonalDisk("data", "us-east-1b") },
			pods:    []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("data"))},
			check:   wantNewNodeIn("us-east-1b")},
		{name: "WaitForFirstConsumer: the StorageClass's allowedTopologies (EBS key)",
			storage: func(st *storage) { st.unbound("data", storagev1.VolumeBindingWaitForFirstConsumer, "us-east-1c") },
			pods:    []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("data"))},
			check:   wantNewNodeIn("us-east-1c")},
		{name: "WaitForFirstConsumer without allowedTopologies: any zone",
			storage: func(st *storage) { st.unbound("data", storagev1.VolumeBindingWaitForFirstConsumer) },
			pods:    []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("data"))},
			check: func(t *testing.T, p *Plan) {
				wantNodes(1)(t, p)
				if z := zonesOf(p.NewNodeClaims[0]); len(z) < 2 {
					t.Fatalf("zones %s, want several", z)
				}
			}},
		{name: "Immediate and unbound: the pod waits for its volume, with the reason",
			storage: func(st *storage) { st.unbound("data", storagev1.VolumeBindingImmediate) },
			pods:    []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("data"))},
			check: func(t *testing.T, p *Plan) {
				wantUnschedulable(1, `persistentvolumeclaim "data" is not bound and its StorageClass "data-class" binds Immediately`)(t, p)
				if len(p.NewNodeClaims) != 0 {
					t.Fatalf("launched for a pod whose zone is unknown:\n%s", summary(p))
				}
			}},
		{name: "a missing claim: no node, the reason",
			pods:  []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("nope"))},
			check: wantUnschedulable(1, `persistentvolumeclaim "nope" not found`)},
		{name: "a zone spread counts every zone the pod's own affinity allows, not only its volume's",
			// kube-scheduler: zone b would hold 2 of the app's pods while zones a
			// and c hold none, a skew of 2 over maxSkew 1, so the pod cannot run
			// until its peers spread. A plan that counted only the volume's zone
			// would launch a node kube-scheduler never uses.
			storage: func(st *storage) { st.zonalDisk("data", "us-east-1b") },
			nodes: func() []*Node {
				return []*Node{zoneNode("a", "us-east-1a", -1), zoneNode("b", "us-east-1b", -1, mkPod("peer", "100m", "128Mi", func(p *corev1.Pod) { p.Labels["app"] = "db" })),
					zoneNode("c", "us-east-1c", -1)}
			},
			pods: []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("data"), func(p *corev1.Pod) { p.Labels["app"] = "db" },
				spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "db"}))},
			check: func(t *testing.T, p *Plan) {
				if len(p.NewNodeClaims) != 0 || len(p.Existing) != 0 || len(p.Unschedulable) != 1 {
					t.Fatalf("placed a pod that kube-scheduler's zone spread refuses:\n%s", summary(p))
				}
			}},
		{name: "an existing node in another zone is not used",
			storage: func(st *storage) { st.zonalDisk("data", "us-east-1b") },
			nodes:   func() []*Node { return []*Node{zoneNode("roomy-a", "us-east-1a", -1)} },
			pods:    []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("data"))},
			check:   wantNewNodeIn("us-east-1b")},
		{name: "an existing node in the volume's zone is used",
			storage: func(st *storage) { st.zonalDisk("data", "us-east-1b") },
			nodes: func() []*Node {
				return []*Node{zoneNode("roomy-a", "us-east-1a", -1), zoneNode("roomy-b", "us-east-1b", -1)}
			},
			pods: []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("data"))},
			check: func(t *testing.T, p *Plan) {
				if p.Existing["default/db"] != "roomy-b" || len(p.NewNodeClaims) != 0 {
					t.Fatalf("existing %v\n%s", p.Existing, summary(p))
				}
			}},
		{name: "a shared claim attaches once: both pods on a node with room for one volume",
			storage: func(st *storage) { st.zonalDisk("shared", "us-east-1a") },
			nodes:   func() []*Node { return []*Node{zoneNode("one-slot", "us-east-1a", 1)} },
			pods:    []*corev1.Pod{mkPod("a", "1", "1Gi", withClaims("shared")), mkPod("b", "1", "1Gi", withClaims("shared"))},
			check: func(t *testing.T, p *Plan) {
				if len(p.Existing) != 2 || len(p.NewNodeClaims) != 0 {
					t.Fatalf("existing %v\n%s", p.Existing, summary(p))
				}
			}},
		{name: "the attach limit reached on an existing node: a new node in the zone",
			storage: func(st *storage) {
				st.zonalDisk("running", "us-east-1a")
				st.zonalDisk("data", "us-east-1a")
			},
			nodes: func() []*Node {
				return []*Node{zoneNode("one-slot", "us-east-1a", 1, mkPod("running", "1", "1Gi", withClaims("running")))}
			},
			pods:  []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("data"))},
			check: wantNewNodeIn("us-east-1a")},
		{name: "an existing node without a limit for the driver takes any number",
			storage: func(st *storage) {
				st.zonalDisk("running", "us-east-1a")
				st.zonalDisk("data", "us-east-1a")
			},
			nodes: func() []*Node {
				return []*Node{zoneNode("unlimited", "us-east-1a", -1, mkPod("running", "1", "1Gi", withClaims("running")))}
			},
			pods: []*corev1.Pod{mkPod("db", "1", "1Gi", withClaims("data"))},
			check: func(t *testing.T, p *Plan) {
				if p.Existing["default/db"] != "unlimited" {
					t.Fatalf("existing %v\n%s", p.Existing, summary(p))
				}
			}},
		{name: "the attach limit reached on a new node opens another",
			pools: []*v1.NodePool{onDemandPool("m5", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge"))},
			storage: func(st *storage) {
				for i := range 30 {
					st.zonalDisk(fmt.Sprintf("d%d", i), "us-east-1a")
				}
			},
			pods: func() []*corev1.Pod {
				var out []*corev1.Pod
				for i := range 30 {
					out = append(out, mkPod(fmt.Sprintf("p%d", i), "100m", "100Mi", withClaims(fmt.Sprintf("d%d", i))))
				}
				return out
			}(),
			check: func(t *testing.T, p *Plan) {
				wantNodes(2)(t, p)
				for _, nc := range p.NewNodeClaims {
					if len(nc.Pods) > 26 {
						t.Fatalf("%d volumes on an m5.xlarge (limit 26):\n%s", len(nc.Pods), summary(p))
					}
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pools := tc.pools
			if pools == nil {
				pools = []*v1.NodePool{od}
			}
			st := &storage{}
			if tc.storage != nil {
				tc.storage(st)
			}
			p := solve(t, pools, tc.pods, func(snap *Snapshot) {
				if tc.nodes != nil {
					snap.Nodes = tc.nodes()
				}
				st.apply(snap)
			})
			tc.check(t, p)
		})
	}
}

// TestVolumeLimitsEveryOption checks that every instance-type option of a
// NodeClaim can attach its pods' volumes, not only the cheapest.
func TestVolumeLimitsEveryOption(t *testing.T) {
	st := &storage{}
	var pods []*corev1.Pod
	for i := range 60 {
		st.zonalDisk(fmt.Sprintf("d%d", i), "us-east-1a")
		pods = append(pods, mkPod(fmt.Sprintf("p%d", i), "50m", "64Mi", withClaims(fmt.Sprintf("d%d", i))))
	}
	p := solve(t, []*v1.NodePool{onDemandPool("default")}, pods, func(snap *Snapshot) { st.apply(snap) })
	if len(p.Unschedulable) > 0 {
		t.Fatalf("unschedulable:\n%s", summary(p))
	}
	for _, nc := range p.NewNodeClaims {
		for _, it := range nc.InstanceTypes {
			if l := it.AttachLimits[volumes.EBSDriver]; len(nc.Pods) > l {
				t.Fatalf("option %s attaches %d volumes, limit %d:\n%s", it.Name, len(nc.Pods), l, summary(p))
			}
		}
	}
}

// TestClusterVolumes is consolidation's view: pods on nodes keep their
// volumes' zone and count against attach limits, and trials roll back.
func TestClusterVolumes(t *testing.T) {
	od := onDemandPool("default")
	cases := []struct {
		name    string
		storage func(*storage)
		nodes   func() []*Node
		remove  string
		check   func(t *testing.T, r Removal)
	}{
		{name: "a pod whose disk is in zone b is never moved to zone a",
			storage: func(st *storage) { st.zonalDisk("data", "us-east-1b") },
			nodes: func() []*Node {
				return []*Node{zoneNode("roomy-a", "us-east-1a", -1), zoneNode("holder-b", "us-east-1b", -1, mkPod("db", "1", "1Gi", withClaims("data")))}
			},
			remove: "holder-b",
			check: func(t *testing.T, r Removal) {
				if len(r.Replacements) != 1 || strings.Join(zonesOf(r.Replacements[0]), ",") != "us-east-1b" || len(r.Unschedulable) > 0 {
					t.Fatalf("want one zone-b replacement, got %+v", r)
				}
			}},
		{name: "without the volume the pod moves to the roomy node",
			nodes: func() []*Node {
				return []*Node{zoneNode("roomy-a", "us-east-1a", -1), zoneNode("holder-b", "us-east-1b", -1, mkPod("db", "1", "1Gi"))}
			},
			remove: "holder-b",
			check: func(t *testing.T, r Removal) {
				if len(r.Replacements) != 0 || len(r.Unschedulable) > 0 {
					t.Fatalf("want no replacement, got %+v", r)
				}
			}},
		{name: "a node at its attach limit takes no moved volume",
			storage: func(st *storage) {
				st.zonalDisk("full", "us-east-1a")
				st.zonalDisk("data", "us-east-1a")
			},
			nodes: func() []*Node {
				return []*Node{zoneNode("one-slot", "us-east-1a", 1, mkPod("running", "1", "1Gi", withClaims("full"))),
					zoneNode("holder", "us-east-1a", -1, mkPod("db", "1", "1Gi", withClaims("data")))}
			},
			remove: "holder",
			check: func(t *testing.T, r Removal) {
				if len(r.Replacements) != 1 {
					t.Fatalf("want one replacement, got %+v", r)
				}
			}},
		{name: "a pod whose claim is being deleted stays",
			storage: func(st *storage) {
				st.zonalDisk("data", "us-east-1a")
				st.claims[0].DeletionTimestamp = &metav1.Time{}
			},
			nodes: func() []*Node {
				return []*Node{zoneNode("roomy", "us-east-1a", -1), zoneNode("holder", "us-east-1a", -1, mkPod("db", "1", "1Gi", withClaims("data")))}
			},
			remove: "holder",
			check: func(t *testing.T, r Removal) {
				if len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "being deleted") {
					t.Fatalf("want the pod unschedulable, got %+v", r)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &storage{}
			if tc.storage != nil {
				tc.storage(st)
			}
			snap := Snapshot{Nodes: tc.nodes(), NodePools: []NodePool{{NodePool: od, InstanceTypes: testCatalog(t)}}}
			st.apply(&snap)
			c := NewCluster(snap, Options{})
			// Twice: a trial that leaked its attachments would change the second.
			for range 2 {
				r, err := c.TryRemove(tc.remove)
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, r)
			}
		})
	}
}

// TestClusterVolumesRollBack tries moving either of two nodes' volumes
// onto a node with one free attachment: each trial must give the slot
// back, or the next one finds the node full. The holders are full too.
func TestClusterVolumesRollBack(t *testing.T) {
	st := &storage{}
	for _, c := range []string{"running", "d1", "d2"} {
		st.zonalDisk(c, "us-east-1a")
	}
	snap := Snapshot{Nodes: []*Node{
		zoneNode("two-slots", "us-east-1a", 2, mkPod("running", "1", "1Gi", withClaims("running"))),
		zoneNode("holder-1", "us-east-1a", 1, mkPod("db-1", "1", "1Gi", withClaims("d1"))),
		zoneNode("holder-2", "us-east-1a", 1, mkPod("db-2", "1", "1Gi", withClaims("d2"))),
	}, NodePools: []NodePool{{NodePool: onDemandPool("default"), InstanceTypes: testCatalog(t)}}}
	st.apply(&snap)
	c := NewCluster(snap, Options{})
	for _, name := range []string{"holder-1", "holder-2", "holder-1"} {
		r, err := c.TryRemove(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Replacements) != 0 || len(r.Unschedulable) != 0 {
			t.Fatalf("removing %s: want its pod on two-slots, got %+v", name, r)
		}
	}
	// Removing both for good needs a node for the second volume.
	if _, err := c.Remove("holder-1"); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.TryRemove("holder-2"); len(r.Replacements) != 1 {
		t.Fatalf("after holder-1 went, want a replacement for holder-2's volume, got %+v", r)
	}
}
