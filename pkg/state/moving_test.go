package state_test

import (
	"slices"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The pods of a node being deleted are planned for at once, unbound;
// those that go with the node, whose replacement is its own pod, or that
// the drain cannot move for now, are not (Karpenter's rule).
func TestMoving(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deleting := map[string]bool{"going": true}
	yes := true
	pdb := func(name, app string, mod func(*policyv1.PodDisruptionBudget)) policyv1.PodDisruptionBudget {
		b := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		mod(&b)
		return b
	}
	pdbs := []policyv1.PodDisruptionBudget{
		pdb("zero", "zero", func(b *policyv1.PodDisruptionBudget) { u := intstr.FromInt32(0); b.Spec.MaxUnavailable = &u }),
		pdb("all", "all", func(b *policyv1.PodDisruptionBudget) { a := intstr.FromString("100%"); b.Spec.MinAvailable = &a }),
		pdb("one", "one", func(b *policyv1.PodDisruptionBudget) { u := intstr.FromInt32(1); b.Spec.MaxUnavailable = &u }),
		pdb("twice-a", "twice", func(b *policyv1.PodDisruptionBudget) { u := intstr.FromInt32(1); b.Spec.MaxUnavailable = &u }),
		pdb("twice-b", "twice", func(b *policyv1.PodDisruptionBudget) { u := intstr.FromInt32(1); b.Spec.MaxUnavailable = &u }),
		pdb("sick", "sick", func(b *policyv1.PodDisruptionBudget) {
			u, p := intstr.FromInt32(0), policyv1.AlwaysAllow
			b.Spec.MaxUnavailable, b.Spec.UnhealthyPodEvictionPolicy = &u, &p
		}),
	}
	terminating := metav1.NewTime(now)
	cases := []struct {
		name  string
		node  string
		mod   func(*corev1.Pod)
		moves bool
	}{
		{"a running pod of a node going", "going", nil, true},
		{"a pod of a node staying", "staying", nil, false},
		{"a DaemonSet pod", "going", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent"}}
		}, false},
		{"a finished pod", "going", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
		{"a terminating pod: its replacement is pending on its own", "going", func(p *corev1.Pod) { p.DeletionTimestamp = &terminating }, false},
		{"a terminating StatefulSet pod: its replacement waits for it", "going", func(p *corev1.Pod) {
			p.DeletionTimestamp = &terminating
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: &yes}}
		}, true},
		{"a pod that tolerates the disrupted taint", "going", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: v1.DisruptedNoScheduleTaint.Key, Operator: corev1.TolerationOpExists}}
		}, false},
		{"an active do-not-disrupt", "going", func(p *corev1.Pod) { p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"} }, false},
		{"a PDB of maxUnavailable 0", "going", func(p *corev1.Pod) { p.Labels["app"] = "zero" }, false},
		{"a PDB of minAvailable 100%", "going", func(p *corev1.Pod) { p.Labels["app"] = "all" }, false},
		{"a PDB that allows one", "going", func(p *corev1.Pod) { p.Labels["app"] = "one" }, true},
		{"two PDBs", "going", func(p *corev1.Pod) { p.Labels["app"] = "twice" }, false},
		{"an unready pod under AlwaysAllow", "going", func(p *corev1.Pod) {
			p.Labels["app"] = "sick"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		}, true},
		{"a ready pod under AlwaysAllow and maxUnavailable 0", "going", func(p *corev1.Pod) {
			p.Labels["app"] = "sick"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{NodeName: tc.node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			if tc.mod != nil {
				tc.mod(p)
			}
			if got := state.Moves(p, deleting, pdbs, now); got != tc.moves {
				t.Fatalf("Moves = %v, want %v", got, tc.moves)
			}
			moving := state.Moving([]*corev1.Pod{p}, func(p *corev1.Pod) bool { return state.Moves(p, deleting, pdbs, now) })
			if len(moving) != map[bool]int{true: 1}[tc.moves] {
				t.Fatalf("Moving gave %d pods", len(moving))
			}
			if tc.moves && (moving[0].Spec.NodeName != "" || p.Spec.NodeName != tc.node) {
				t.Fatal("the copy is not unbound, or the cache's pod was changed")
			}
		})
	}
}

// Disrupting marks the nodes of the commands under way; on those whose
// pods move (a deletion's), the movable pods become pending and the
// others stay; the snapshot it was given is not changed.
func TestDisrupting(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(name, node string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	held := map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	snap := scheduling.Snapshot{
		Pods: []*corev1.Pod{pod("waiting", "", nil)},
		Nodes: []*scheduling.Node{
			{Name: "deleted", Pods: []*corev1.Pod{pod("d-0", "deleted", nil), pod("d-held", "deleted", held)}},
			{Name: "replaced", Pods: []*corev1.Pod{pod("r-0", "replaced", nil)}},
			{Name: "staying", Pods: []*corev1.Pod{pod("s-0", "staying", nil)}},
		},
	}
	got := state.Disrupting(snap, map[string]bool{"deleted": true, "replaced": true}, map[string]bool{"deleted": true}, nil, now)
	names := func(ps []*corev1.Pod) (out []string) {
		for _, p := range ps {
			out = append(out, p.Name+"@"+p.Spec.NodeName)
		}
		return out
	}
	if want := []string{"waiting@", "d-0@"}; !slices.Equal(names(got.Pods), want) {
		t.Errorf("pending %v, want %v", names(got.Pods), want)
	}
	for i, want := range []struct {
		marked bool
		pods   []string
	}{{true, []string{"d-held@deleted"}}, {true, []string{"r-0@replaced"}}, {false, []string{"s-0@staying"}}} {
		n := got.Nodes[i]
		if n.MarkedForDeletion != want.marked || !slices.Equal(names(n.Pods), want.pods) {
			t.Errorf("node %s: marked %v with %v, want %v with %v", n.Name, n.MarkedForDeletion, names(n.Pods), want.marked, want.pods)
		}
	}
	if snap.Nodes[0].MarkedForDeletion || len(snap.Nodes[0].Pods) != 2 || len(snap.Pods) != 1 {
		t.Error("the snapshot given was changed")
	}
}
