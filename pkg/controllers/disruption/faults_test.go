package disruption

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestAbandonWhenTheReplacementNeverInitializes(t *testing.T) {
	w := newWorld(t, "100%", replaceable()...)
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(w.taintedAtLaunch) != 1 || !w.taintedAtLaunch[0] {
		t.Fatalf("the candidate was not tainted before its replacement was launched: %v", w.taintedAtLaunch)
	}
	// Kept, as Karpenter keeps it, as an ordinary NodeClaim.
	w.released("old", 1)
	if _, deleted := w.replacements(); deleted != 0 {
		t.Fatalf("%d replacement(s) deleted, want 0", deleted)
	}
	var claims v1.NodeClaimList
	if err := w.kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims.Items {
		if _, ok := nc.Annotations[v1.AnnotationReplacing]; ok {
			t.Errorf("%s still says it is replacing: %v", nc.Name, nc.Annotations)
		}
	}
	// The next pass waits for it rather than launching another.
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	w.released("old", 1)
}

// TestAFailedUntaintKeepsTheMark: when an abandoned command cannot take
// the disrupted taint off its node, the NodeClaim keeps its
// DisruptionReason, the mark by which the next pass finds the node and
// releases it; cleared alone, it left the node unschedulable for good.
func TestAFailedUntaintKeepsTheMark(t *testing.T) {
	w := newWorld(t, "100%", replaceable()...)
	w.fail = func(op string, obj client.Object) error {
		if n, ok := obj.(*corev1.Node); ok && op == "patch" && !taints.Has(n.Spec.Taints, v1.DisruptedNoScheduleTaint) {
			return errors.New("injected")
		}
		return nil
	}
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if !w.tainted("old") {
		t.Fatal("the untaint did not fail as injected")
	}
	if nc := w.claim("old"); nc == nil || meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason) == nil {
		t.Fatal("the DisruptionReason went although the node kept its taint")
	}
	w.releasedByAPassWithoutFaults("old", 1)
}

func TestRecheckBeforeTheDrain(t *testing.T) {
	dnd := boundPod("precious", "old", "100m")
	dnd.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	cases := []struct {
		name string
		// arrive are the pods that reach the candidate (before its taint)
		// while the replacement launches.
		arrive []client.Object
		// landOnReplacement binds a pod to the replacement once it is up.
		landOnReplacement bool
		// shrink makes the replacement's node report a tenth of its
		// allocatable, so that packing the same pods a second time fails.
		shrink bool
		// wantAbandon is part of the abandon event; "" when the command
		// goes ahead.
		wantAbandon string
	}{
		{name: "nothing arrives: the candidate is deleted"},
		{name: "a do-not-disrupt pod arrives", arrive: []client.Object{dnd}, wantAbandon: `node old: pod default/precious has "karpenter.sh/do-not-disrupt: true"`},
		{name: "a pod that no longer fits arrives", arrive: []client.Object{boundPod("late", "old", "1")}, wantAbandon: "its pods no longer fit on the other nodes and the replacements"},
		{name: "a PDB that allows no eviction appears", arrive: []client.Object{&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "inflate-0"}}}}},
			wantAbandon: "node old: PDB default/inflate blocks the eviction of pod default/inflate-0"},
		{name: "a pod takes the replacement's room, and is not evicted with it", landOnReplacement: true, wantAbandon: "its pods no longer fit on the other nodes and the replacements"},
		// The plan was checked when it was made; with no pod come since, a
		// second packing would only abandon good commands over how it
		// differs from the first, and launch their replacements again.
		{name: "nothing arrives: the plan is not packed a second time", shrink: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "100%", replaceable()...)
			w.launch = func(w *world, nc *v1.NodeClaim) {
				if tc.shrink {
					var node corev1.Node
					if err := w.kube.Get(context.Background(), client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
						t.Fatal(err)
					}
					for k, q := range node.Status.Allocatable {
						q.SetMilli(q.MilliValue() / 10)
						node.Status.Allocatable[k] = q
					}
					if err := w.kube.Status().Update(context.Background(), &node); err != nil {
						t.Fatal(err)
					}
				}
				if tc.landOnReplacement {
					if err := w.kube.Create(context.Background(), boundPod("newcomer", nc.Status.NodeName, "1")); err != nil {
						t.Fatal(err)
					}
				}
				for _, o := range tc.arrive {
					if err := w.kube.Create(context.Background(), o); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			events := w.events()
			if tc.wantAbandon == "" {
				if nc := w.claim("old"); nc != nil && nc.DeletionTimestamp == nil {
					t.Fatalf("the candidate was not deleted; events:\n%s", events)
				}
				if alive, _ := w.replacements(); alive != 1 {
					t.Fatalf("%d replacement(s), want 1", alive)
				}
				if !strings.Contains(events, "DisruptionTerminating") {
					t.Errorf("no DisruptionTerminating event:\n%s", events)
				}
				return
			}
			if !strings.Contains(events, "DisruptionBlocked disruption abandoned: "+tc.wantAbandon) {
				t.Fatalf("no abandon event with %q:\n%s", tc.wantAbandon, events)
			}
			if tc.landOnReplacement {
				if alive, deleted := w.replacements(); alive != 1 || deleted != 0 {
					t.Fatalf("the replacement a pod runs on: %d alive, %d deleted; want it kept", alive, deleted)
				}
				return
			}
			w.released("old", 0)
			if _, deleted := w.replacements(); deleted != 1 {
				t.Fatalf("%d replacement(s) deleted, want 1", deleted)
			}
		})
	}
}

// TestEveryErrorPathCleansUp injects a failure at each step of a command
// and checks that nothing is left: taint, DisruptionReason, replacement.
func TestEveryErrorPathCleansUp(t *testing.T) {
	boom := errors.New("injected")
	isClaim := func(obj client.Object, name string) bool {
		_, ok := obj.(*v1.NodeClaim)
		return ok && (name == "" || obj.GetName() == name)
	}
	cases := []struct {
		name    string
		fail    func(op string, obj client.Object) error
		wantErr bool
	}{
		{name: "marking the NodeClaim fails", wantErr: true, fail: func(op string, obj client.Object) error {
			if op == "status" && isClaim(obj, "old") {
				return boom
			}
			return nil
		}},
		{name: "tainting the node fails", wantErr: true, fail: func(op string, obj client.Object) error {
			if _, ok := obj.(*corev1.Node); ok && op == "patch" {
				return boom
			}
			return nil
		}},
		{name: "launching the replacement fails", wantErr: true, fail: func(op string, obj client.Object) error {
			if op == "create" && isClaim(obj, "") {
				return boom
			}
			return nil
		}},
		{name: "reading the replacement fails", fail: func(op string, obj client.Object) error {
			if op == "get" && isClaim(obj, "") && obj.GetName() != "old" {
				return boom
			}
			return nil
		}},
		{name: "the recheck cannot list PDBs", wantErr: true, fail: func(op string, obj client.Object) error {
			if _, ok := obj.(*policyv1.PodDisruptionBudget); ok && op == "list" {
				return boom
			}
			return nil
		}},
		{name: "deleting the candidate fails", wantErr: true, fail: func(op string, obj client.Object) error {
			if op == "delete" && isClaim(obj, "old") {
				return boom
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "100%", replaceable()...)
			w.launch = func(*world, *v1.NodeClaim) {}
			// The decision reads what the command reads (PDBs): fail only
			// once the command has begun, with its first write.
			begun := false
			w.fail = func(op string, obj client.Object) error {
				if op == "status" && isClaim(obj, "old") {
					begun = true
				}
				if !begun {
					return nil
				}
				return tc.fail(op, obj)
			}
			err := w.reconcile()
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			w.mu.Lock()
			w.fail = nil
			w.mu.Unlock()
			w.released("old", 0)
		})
	}
}

// TestStatusWritesRetryOnConflict: a conflicting status write (another
// controller wrote the NodeClaim meanwhile) is read again and retried.
func TestStatusWritesRetryOnConflict(t *testing.T) {
	w := newWorld(t, "100%", replaceable()...)
	w.launch = func(*world, *v1.NodeClaim) {}
	conflicts := 0
	w.fail = func(op string, obj client.Object) error {
		if op == "status" && obj.GetName() == "old" && conflicts < 2 {
			conflicts++
			return apierrors.NewConflict(schema.GroupResource{Group: v1.Group, Resource: "nodeclaims"}, "old", errors.New("changed"))
		}
		return nil
	}
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if conflicts != 2 {
		t.Fatalf("%d conflicts", conflicts)
	}
	for _, p := range w.statusPatches {
		if !strings.Contains(p, `"resourceVersion"`) {
			t.Errorf("a status patch without optimistic locking: %s", p)
		}
	}
	if nc := w.claim("old"); nc != nil && nc.DeletionTimestamp == nil {
		t.Fatalf("the command did not go ahead after the conflicts: %s", w.events())
	}
}
