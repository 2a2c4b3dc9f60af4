package termination_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestVolumeWaitEndsAtDeadline: past the terminationGracePeriod deadline
// the instance goes with the volume attached, and the condition says why.
func TestVolumeWaitEndsAtDeadline(t *testing.T) {
	deadline := now.Add(30 * time.Second).Format(time.RFC3339)
	e := newEnv(t, interceptor.Funcs{}, newNode(), newClaim(map[string]string{v1.AnnotationNodeClaimTerminationTimestamp: deadline}),
		attachment("va", nodeName, "pv-1"))
	e.deleteObj(t, newNode())
	for range 3 {
		if res := e.mustTerminate(t); res.RequeueAfter <= 0 || res.RequeueAfter > 30*time.Second {
			t.Fatalf("requeue after %v while waiting for the volume", res.RequeueAfter)
		}
	}
	if slices.ContainsFunc(e.journal, func(s string) bool { return strings.HasPrefix(s, "cloud delete") }) || !e.exists(newNode()) {
		t.Fatalf("did %v before the deadline", e.journal)
	}
	e.clock.Step(31 * time.Second)
	for range 5 {
		e.mustTerminate(t)
	}
	if e.exists(newNode()) {
		t.Fatalf("node held past the deadline: %v", e.journal)
	}
	if got := e.condition(t, v1.ConditionTypeVolumesDetached); got != "False/TerminationGracePeriodElapsed" {
		t.Errorf("VolumesDetached %s", got)
	}
}

func notReady(n *corev1.Node) *corev1.Node {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown"}}
	return n
}

// TestDeadNode: a node whose kubelet stopped reporting and whose instance
// is gone is let go at once, even with a pod whose deletion its kubelet
// will never confirm; a Ready node, or one whose instance runs, is drained.
func TestDeadNode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		node     *corev1.Node
		gone     bool
		released bool
	}{
		{name: "not ready, instance gone: released at once", node: notReady(newNode()), gone: true, released: true},
		{name: "not ready, instance running (a dead kubelet): drained", node: notReady(newNode())},
		{name: "ready, the cloud's listing does not show the instance yet: drained", node: newNode(), gone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, interceptor.Funcs{}, tc.node, newClaim(nil), newPod("db-0", "1", terminatingFor(10*time.Minute)))
			e.cloud.gone = tc.gone
			e.deleteObj(t, newNode())
			e.journal = nil
			e.mustTerminate(t)
			if got := !e.exists(newNode()); got != tc.released {
				t.Fatalf("node released %t, want %t; journal %v", got, tc.released, e.journal)
			}
			if slices.ContainsFunc(e.journal, func(s string) bool { return strings.HasPrefix(s, "cloud delete") }) {
				t.Errorf("the instance was deleted while a pod is terminating: %v", e.journal)
			}
		})
	}
}

// TestTerminationGracePeriodIsADeadline: a pod whose deletion outlasts the
// NodeClaim's terminationGracePeriod (a long preStop hook, a long grace) is
// deleted again so that it ends by the deadline, and when the period is up
// the node goes whether the pod did or not.
func TestTerminationGracePeriodIsADeadline(t *testing.T) {
	// The fake API server stamps a deletion with the wall clock, so this
	// test's clock is the wall clock.
	base := time.Now().Truncate(time.Second)
	deadline := base.Add(2 * time.Minute)
	grace := int64(3600)
	long := func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &grace }
	var deletes []string
	funcs := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if pod, ok := obj.(*corev1.Pod); ok {
			o := &client.DeleteOptions{}
			o.ApplyOptions(opts)
			g := int64(-1)
			if o.GracePeriodSeconds != nil {
				g = *o.GracePeriodSeconds
			}
			deletes = append(deletes, fmt.Sprintf("%s grace %d", pod.Name, g))
			// The fake API server does not delay deletions; keep the pod
			// terminating as a kubelet running its preStop hook would.
			cur := &corev1.Pod{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
				return err
			}
			cur.Finalizers = append(cur.Finalizers, "test/prestop")
			if err := c.Update(ctx, cur); err != nil {
				return err
			}
		}
		return c.Delete(ctx, obj, opts...)
	}}
	e := newEnv(t, funcs, newNode(), newClaim(map[string]string{v1.AnnotationNodeClaimTerminationTimestamp: deadline.Format(time.RFC3339)}),
		newPod("slow", "1", long), newPod("started", "1", long, terminatingFor(base.Sub(now)+time.Hour)))
	e.clock.SetTime(base)
	e.deleteObj(t, newNode())
	e.mustTerminate(t)
	if want := []string{"slow grace 120", "started grace 120"}; !slices.Equal(deletes, want) {
		t.Fatalf("deletions %v, want %v: each pod's grace cut to the deadline", deletes, want)
	}
	if !e.exists(newNode()) {
		t.Fatal("node gone before its pods' grace periods ended")
	}
	e.clock.Step(time.Minute)
	deletes = nil
	e.mustTerminate(t)
	if len(deletes) != 0 {
		t.Errorf("deleted again %v although the deletions already end by the deadline", deletes)
	}
	e.clock.Step(time.Minute)
	for range 3 {
		e.mustTerminate(t)
	}
	if e.exists(newNode()) {
		t.Fatalf("node held past its terminationGracePeriod: %v", e.journal)
	}
	if !e.exists(newPod("slow", "1")) {
		t.Fatal("the test's pod went; it should still be terminating")
	}
}

// TestEvictionRefusalsBackOff: a pod a PDB protects is asked for again
// after a growing pause, not on every pass.
func TestEvictionRefusalsBackOff(t *testing.T) {
	asks := 0
	funcs := interceptor.Funcs{SubResourceCreate: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceCreateOption) error {
		asks++
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	}}
	e := newEnv(t, funcs, newNode(), newClaim(nil), newPod("web", "1"))
	e.deleteObj(t, newNode())
	var at []int
	for i := range 8 {
		before := asks
		e.mustTerminate(t)
		if asks > before {
			at = append(at, i)
		}
		e.clock.Step(time.Second)
	}
	// Asked at 0 s, then after 1, 2 and 4 s more.
	if want := []int{0, 1, 3, 7}; !slices.Equal(at, want) {
		t.Fatalf("asked at seconds %v, want %v", at, want)
	}
}

// TestDeadlineDeletesWhatIsLeft: a pod with no grace period of its own is
// deleted when the terminationGracePeriod is up (not left on the node that
// goes), told by a TerminationGracePeriodExpiring event, as in Karpenter.
func TestDeadlineDeletesWhatIsLeft(t *testing.T) {
	zero := int64(0)
	deadline := now.Add(10 * time.Second)
	e := newEnv(t, interceptor.Funcs{}, newNode(), newClaim(map[string]string{v1.AnnotationNodeClaimTerminationTimestamp: deadline.Format(time.RFC3339)}),
		newPod("pinned", "1", doNotDisrupt, func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &zero }))
	e.deleteObj(t, newNode())
	e.journal = nil
	e.mustTerminate(t)
	if slices.Contains(e.journal, "delete Pod pinned") {
		t.Fatalf("deleted before the deadline: %v", e.journal)
	}
	e.clock.Step(10 * time.Second)
	e.mustTerminate(t)
	if !slices.Contains(e.journal, "delete Pod pinned") {
		t.Fatalf("not deleted at the deadline: %v", e.journal)
	}
	if evs := e.drainEvents(); !slices.ContainsFunc(evs, func(s string) bool { return strings.Contains(s, "TerminationGracePeriodExpiring") }) {
		t.Errorf("no TerminationGracePeriodExpiring event: %v", evs)
	}
}
