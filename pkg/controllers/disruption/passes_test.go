package disruption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestNominationProtectsForItsWindow: a node the provisioner launched for
// pending pods is left alone while they wait, for the nomination's window,
// and only it; a pod pending anywhere else no longer stops all disruption.
func TestNominationProtectsForItsWindow(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// p waits for the node launched for it; it fits no node the model
	// knows, so only the nomination can protect that node.
	p := pendingPod("p", "1", now)
	p.Spec.NodeSelector = map[string]string{"example.com/for": "p"}
	cases := []struct {
		name string
		// then happens after the first round; the node must then go.
		then func(w *world)
	}{
		{name: "until the window ends", then: func(w *world) { w.fc.Step(21 * time.Second) }},
		{name: "until its pods no longer wait", then: func(w *world) {
			if err := w.kube.Delete(context.Background(), p.DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			for _, name := range []string{"launched-for-p", "idle"} {
				node, nc := nodeAndClaim(name, "c6a.large", true)
				objs = append(objs, node, nc)
			}
			// Pending just now, and fits nowhere: once, this paused everything.
			objs = append(objs, pendingPod("unplaceable", "500", now), p.DeepCopy())
			w := newWorld(t, "100%", objs...)
			w.c.Nominations.NominateNodeClaim("launched-for-p", p)
			if err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			if nc := w.claim("idle"); nc != nil && nc.DeletionTimestamp == nil {
				t.Fatalf("a pending pod elsewhere held back the empty node; events:\n%s", w.events())
			}
			if nc := w.claim("launched-for-p"); nc == nil || nc.DeletionTimestamp != nil {
				t.Fatal("the nominated node was removed")
			}
			if ev := w.events(); !strings.Contains(ev, "DisruptionBlocked nominated for pending pod default/p") {
				t.Fatalf("no event saying the node is nominated:\n%s", ev)
			}
			tc.then(w)
			if err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			if nc := w.claim("launched-for-p"); nc != nil && nc.DeletionTimestamp == nil {
				t.Fatalf("the node was still protected; events:\n%s", w.events())
			}
		})
	}
}

// TestExplainedIsPruned: the reasons given are forgotten with their nodes.
func TestExplainedIsPruned(t *testing.T) {
	node, nc := nodeAndClaim("kept", "c6a.large", true)
	node.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	w := newWorld(t, "100%", node, nc)
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.c.explained["kept"]; !ok {
		t.Fatalf("no reason recorded: %v", w.c.explained)
	}
	for _, o := range []client.Object{node, nc} {
		if err := w.kube.Delete(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(w.c.explained) != 0 {
		t.Fatalf("reasons kept for nodes that are gone: %v", w.c.explained)
	}
}

// TestStrikesWithoutAPause: pods that kube-scheduler leaves pending after
// a risky command are counted, without any pending pod stopping
// disruption; the pods of a node being deleted, pending only in the plan
// (state.Moving) with their bound pod's PodScheduled=True, are not.
func TestStrikesWithoutAPause(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pod      func(w *world, i int) *corev1.Pod
		cautious bool
	}{
		{"stranded pods count", func(w *world, i int) *corev1.Pod {
			return pendingPod(fmt.Sprintf("stranded-%d", i), "1", w.fc.Now())
		}, true},
		{"pods of a node being deleted do not", func(w *world, i int) *corev1.Pod {
			p := boundPod(fmt.Sprintf("moving-%d", i), "going", "1")
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(w.fc.Now())}}
			return p
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, nc := nodeAndClaim("going", "c6a.2xlarge", true)
			nc.Finalizers = []string{v1.TerminationFinalizer}
			w := newWorld(t, "100%", node, nc)
			if err := w.kube.Delete(context.Background(), nc); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				w.c.caution.Risked(w.fc.Now())
				w.fc.Step(30 * time.Second)
				if err := w.kube.Create(context.Background(), tc.pod(w, i)); err != nil {
					t.Fatal(err)
				}
				if err := w.reconcile(); err != nil {
					t.Fatal(err)
				}
			}
			if got := w.c.caution.Cautious(w.fc.Now()); got != tc.cautious {
				t.Fatalf("cautious = %v after three pods, want %v", got, tc.cautious)
			}
		})
	}
}

// TestDriftWithTerminationGracePeriod: a drifted node that only its pods
// protect (do-not-disrupt) is replaced when its NodeClaim has a
// terminationGracePeriod, which bounds how long the drain waits for them,
// and left alone without one, as in Karpenter.
func TestDriftWithTerminationGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tgp      *metav1.Duration
		replaced bool
	}{
		{name: "with a terminationGracePeriod: replaced", tgp: &metav1.Duration{Duration: time.Hour}, replaced: true},
		{name: "without one: left alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, nc := nodeAndClaim("old", "c6a.2xlarge", true)
			nc.Spec.TerminationGracePeriod = tc.tgp
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "AMIDrift",
				LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))})
			pinned := boundPod("pinned", "old", "1")
			pinned.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
			w := newWorld(t, "100%", node, nc, pinned)
			w.launch = func(*world, *v1.NodeClaim) {} // replacements come up
			if err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			got := w.claim("old")
			if replaced := got == nil || got.DeletionTimestamp != nil; replaced != tc.replaced {
				t.Fatalf("replaced %t, want %t; events:\n%s", replaced, tc.replaced, w.events())
			}
		})
	}
}

// TestDeletionsWaitAndSimulateAgain: a deletion waits ValidationDelay, its
// candidate still open to pods, then is tainted and simulated again; when
// the room it counted on was taken meanwhile it is abandoned, as
// Karpenter's validation does.
func TestDeletionsWaitAndSimulateAgain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fillOther bool
		deleted   bool
	}{
		{name: "the room is still there: deleted", deleted: true},
		{name: "a pod took the other node's room meanwhile: abandoned", fillOther: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, aClaim := nodeAndClaim("a", "c6a.xlarge", true)
			b, bClaim := nodeAndClaim("b", "c6a.2xlarge", true)
			w := newWorld(t, "100%", a, aClaim, b, bClaim, boundPod("a-0", "a", "2"), boundPod("b-0", "b", "5"))
			done := w.reconcileUntilTheDeletionWaits()
			if w.tainted("a") {
				t.Fatal("the candidate was tainted while the command waited: its room is held from pending pods")
			}
			if tc.fillOther {
				if err := w.kube.Create(context.Background(), boundPod("late", "b", "2")); err != nil {
					t.Fatal(err)
				}
			}
			w.drive(func() {
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			got := w.claim("a")
			if deleted := got == nil || got.DeletionTimestamp != nil; deleted != tc.deleted {
				t.Fatalf("deleted %t, want %t; events:\n%s", deleted, tc.deleted, w.events())
			}
			if !tc.deleted && w.tainted("a") {
				t.Error("the abandoned candidate keeps its taint")
			}
		})
	}
}

// TestADeletionGoesAheadWithWhatStillHolds: a deletion of several nodes
// whose recheck finds that not all of them may go any more deletes those
// before the first that may not, and releases the rest; Karpenter would
// abandon it whole. a and b each hold a 1-CPU pod that c's room holds
// both of, and the decision removes a first.
func TestADeletionGoesAheadWithWhatStillHolds(t *testing.T) {
	dnd := boundPod("precious", "b", "100m")
	dnd.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	for _, tc := range []struct {
		name string
		// arrive are created while the command waits, before the taint.
		arrive []client.Object
		// deleted and kept are the candidates deleted and released.
		deleted, kept []string
		want          string
	}{
		{name: "the room still holds both: both go", deleted: []string{"a", "b"}},
		{name: "a pod took room for one of them: a goes, b stays", arrive: []client.Object{boundPod("late", "c", "1")},
			deleted: []string{"a"}, kept: []string{"b"}, want: "1 more node(s) would be needed, for pod default/b-0 first"},
		{name: "a do-not-disrupt pod came to b: a goes, b stays", arrive: []client.Object{dnd},
			deleted: []string{"a"}, kept: []string{"b"}, want: `node b: pod default/precious has "karpenter.sh/do-not-disrupt: true"`},
		{name: "no room for the first: neither goes", arrive: []client.Object{boundPod("late", "c", "2")},
			kept: []string{"a", "b"}, want: "for pod default/a-0 first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, aClaim := nodeAndClaim("a", "c6a.large", true)
			b, bClaim := nodeAndClaim("b", "c6a.large", true)
			c, cClaim := nodeAndClaim("c", "c6a.2xlarge", true)
			w := newWorld(t, "100%", a, aClaim, b, bClaim, c, cClaim,
				boundPod("a-0", "a", "1"), boundPod("b-0", "b", "1"), boundPod("b-1", "b", "100m"), boundPod("c-0", "c", "5"))
			done := w.reconcileUntilTheDeletionWaits()
			for _, o := range tc.arrive {
				if err := w.kube.Create(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			w.drive(func() {
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			events := w.events()
			for _, name := range tc.deleted {
				if nc := w.claim(name); nc != nil && nc.DeletionTimestamp == nil {
					t.Errorf("candidate %s was not deleted; events:\n%s", name, events)
				}
			}
			for _, name := range tc.kept {
				w.released(name, 0)
			}
			blocked := 0
			for _, e := range strings.Split(events, "\n") {
				if strings.Contains(e, "DisruptionBlocked disruption abandoned: ") && strings.Contains(e, tc.want) {
					blocked++
				}
			}
			if tc.want != "" && blocked != len(tc.kept) {
				t.Errorf("%d DisruptionBlocked event(s) with %q, want one for each of %v:\n%s", blocked, tc.want, tc.kept, events)
			}
		})
	}
}

// TestRestartMidReplacement: a controller that stopped while a command
// waited for its replacement finds, at start, the candidate it tainted and
// the replacement it launched. The candidate is released; the replacement
// is deleted unless pods run on it, and one whose candidate went is kept.
func TestRestartMidReplacement(t *testing.T) {
	for _, tc := range []struct {
		name          string
		candidateGone bool
		// otherGone: the command had a second candidate, which went.
		otherGone bool
		busy      bool
		wantKept  bool
	}{
		{name: "the candidate stayed, nothing runs on the replacement: deleted"},
		{name: "the candidate stayed, a pod landed on the replacement: kept", busy: true, wantKept: true},
		{name: "the candidate went: the replacement is an ordinary NodeClaim", candidateGone: true, wantKept: true},
		{name: "one of two candidates went: its pods need the replacement, kept", otherGone: true, wantKept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if !tc.candidateGone {
				node, nc := nodeAndClaim("old", "c6a.2xlarge", true)
				node.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
				nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
					Reason: string(v1.DisruptionReasonUnderutilized), LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))})
				objs = append(objs, node, nc, boundPod("inflate-0", "old", "1"))
			}
			rnode, repl := nodeAndClaim("repl", "c6a.large", true)
			repl.Annotations = map[string]string{v1.AnnotationReplacing: "old"}
			if tc.otherGone {
				repl.Annotations[v1.AnnotationReplacing] = "old,gone"
			}
			objs = append(objs, rnode, repl)
			if tc.busy {
				objs = append(objs, boundPod("landed", "repl", "100m"))
			}
			w := newWorld(t, "100%", objs...)
			if err := w.c.releaseStale(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !tc.candidateGone && w.tainted("old") {
				t.Error("the candidate is still tainted")
			}
			got := w.claim("repl")
			kept := got != nil && got.DeletionTimestamp == nil
			if kept != tc.wantKept {
				t.Fatalf("replacement kept %t, want %t", kept, tc.wantKept)
			}
			if kept {
				if _, ok := got.Annotations[v1.AnnotationReplacing]; ok {
					t.Errorf("the kept replacement still says it is replacing: %v", got.Annotations)
				}
			}
		})
	}
}

// TestConsolidationType: the label Karpenter's dashboard groups decisions by.
func TestConsolidationType(t *testing.T) {
	one := []disruption.Candidate{{Node: "a"}}
	two := []disruption.Candidate{{Node: "a"}, {Node: "b"}}
	tests := []struct {
		cmd  disruption.Command
		want string
	}{
		{disruption.Command{Reason: v1.DisruptionReasonEmpty, Candidates: two}, "empty"},
		{disruption.Command{Reason: v1.DisruptionReasonUnderutilized, Candidates: one}, "single"},
		{disruption.Command{Reason: v1.DisruptionReasonUnderutilized, Candidates: two}, "multi"},
		{disruption.Command{Reason: v1.DisruptionReasonDrifted, Candidates: one}, ""},
	}
	for _, tt := range tests {
		if got := consolidationType(tt.cmd); got != tt.want {
			t.Errorf("%s with %d candidates: %q, want %q", tt.cmd.Reason, len(tt.cmd.Candidates), got, tt.want)
		}
	}
}

// TestDecisionsWaitForThePlanSlot: while the provisioner plans, disruption
// waits, and decides nothing if its context ends first.
func TestDecisionsWaitForThePlanSlot(t *testing.T) {
	w := newWorld(t, "100%", replaceable()...)
	held, err := w.c.Cluster.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := w.c.Reconcile(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a decision while the slot was held: %v, want context.DeadlineExceeded", err)
	}
	if w.tainted("old") || len(w.taintedAtLaunch) != 0 {
		t.Fatal("disruption acted while the slot was held")
	}
	held()
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(w.taintedAtLaunch) != 1 {
		t.Fatalf("%d replacement(s) launched once the slot was free, want 1", len(w.taintedAtLaunch))
	}
}

// TestEachPassReleasesWhatWasLeftMarked: a node left tainted, with its
// NodeClaim's DisruptionReason, by a run that crashed or by a command whose
// release failed is released by the next pass, not only at start: a
// 153-node command's release once ran out of time against a busy API
// server and left its nodes unschedulable.
func TestEachPassReleasesWhatWasLeftMarked(t *testing.T) {
	boom := errors.New("injected")
	for _, tc := range []struct {
		name string
		// failedPasses fail every node patch, before the pass that succeeds.
		failedPasses int
	}{
		{name: "left marked"},
		{name: "the first release fails too", failedPasses: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, nc := nodeAndClaim("old", "c6a.2xlarge", true)
			node.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
				Reason: string(v1.DisruptionReasonUnderutilized), LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))})
			// A budget of none: the passes release and decide nothing.
			w := newWorld(t, "0", node, nc, boundPod("inflate-0", "old", "1"))
			for range tc.failedPasses {
				w.fail = func(op string, obj client.Object) error {
					if _, ok := obj.(*corev1.Node); ok && op == "patch" {
						return boom
					}
					return nil
				}
				_ = w.reconcile()
				if !w.tainted("old") {
					t.Fatal("released although every node patch failed")
				}
			}
			w.releasedByAPassWithoutFaults("old", 0)
		})
	}
}
