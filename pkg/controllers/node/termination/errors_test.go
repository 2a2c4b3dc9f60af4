package termination_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestTerminationErrors covers what goes wrong during a termination.
func TestTerminationErrors(t *testing.T) {
	refuse := func(err error) interceptor.Funcs {
		return interceptor.Funcs{SubResourceCreate: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceCreateOption) error {
			return err
		}}
	}
	cases := []struct {
		name     string
		funcs    interceptor.Funcs
		cloudErr error
		objs     []client.Object
		// wantErr is a substring of the error; "" for none.
		wantErr string
		check   func(t *testing.T, e *env, res reconcile.Result)
	}{
		{name: "a PDB refuses the eviction (429): retried, with a FailedDraining event",
			funcs: refuse(apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)),
			objs:  []client.Object{newNode(), newClaim(nil), newPod("web", "1")},
			check: func(t *testing.T, e *env, res reconcile.Result) {
				if res.RequeueAfter <= 0 {
					t.Errorf("no requeue: %v", res)
				}
				// The same text on every retry, so that the recorder folds
				// them into one event.
				want := "Warning FailedDraining Failed to evict pod default/web: Cannot evict pod as it would violate the pod's disruption budget."
				if evs := e.drainEvents(); !slices.Contains(evs, want) {
					t.Errorf("no event %q: %v", want, evs)
				}
				if !e.exists(newPod("web", "1")) || !e.exists(newNode()) || len(e.journal) > 1 {
					t.Errorf("went on past the refused eviction: %v", e.journal)
				}
			}},
		{name: "another eviction error is returned",
			funcs:   refuse(apierrors.NewInternalError(errors.New("etcd is down"))),
			objs:    []client.Object{newNode(), newClaim(nil), newPod("web", "1")},
			wantErr: "evicting default/web",
		},
		{name: "the instance cannot be deleted: the finalizer stays",
			cloudErr: errors.New("ec2 is down"),
			objs:     []client.Object{newNode(), newClaim(nil)},
			check: func(t *testing.T, e *env, res reconcile.Result) {
				node := newNode()
				if !e.exists(node) || !controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer) {
					t.Errorf("node released although its instance was not deleted")
				}
				// Told on the NodeClaim and retried at a steady pace.
				if res.RequeueAfter != lifecycle.InstancePoll {
					t.Errorf("requeue after %v, want %v", res.RequeueAfter, lifecycle.InstancePoll)
				}
				found := false
				for len(e.events.Events) > 0 {
					if ev := <-e.events.Events; strings.Contains(ev, "TerminationFailed") && strings.Contains(ev, "terminating instance: ec2 is down") {
						found = true
					}
				}
				if !found {
					t.Error("no TerminationFailed event with the cloud's error")
				}
			}},
		{name: "the NodeClaim is gone: the instance is deleted by the node's provider ID",
			objs: []client.Object{newNode(), newPod("web", "1")},
			check: func(t *testing.T, e *env, _ reconcile.Result) {
				for range 5 {
					e.mustTerminate(t)
				}
				want := []string{"evict web", "cloud delete " + providerID, "release Node " + nodeName}
				if got := compact(e.journal); !slices.Equal(got, want) {
					t.Errorf("journal %v, want %v", got, want)
				}
			}},
		{name: "the node is gone", objs: []client.Object{newClaim(nil)},
			check: func(t *testing.T, e *env, res reconcile.Result) {
				if len(e.journal) != 0 || res.RequeueAfter != 0 {
					t.Errorf("did %v, requeue %v", e.journal, res)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.funcs, tc.objs...)
			e.cloud.deleteErr = tc.cloudErr
			if e.exists(newNode()) {
				e.deleteObj(t, newNode())
			}
			e.journal = nil
			var res reconcile.Result
			var err error
			for range 3 {
				if res, err = e.terminate(t); err != nil {
					break
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, e, res)
			}
		})
	}
}

// TestNodeClaimFinalizerErrors covers the NodeClaim finalizer's failures.
func TestNodeClaimFinalizerErrors(t *testing.T) {
	t.Run("the instance cannot be deleted: the finalizer stays", func(t *testing.T) {
		e := newEnv(t, interceptor.Funcs{}, newClaim(nil))
		e.cloud.deleteErr = errors.New("ec2 is down")
		e.deleteObj(t, newClaim(nil))
		// Reported on the NodeClaim, for the person who can fix it, and
		// retried at a steady pace.
		res, err := e.finalize(t)
		if err != nil || res.RequeueAfter != lifecycle.InstancePoll {
			t.Fatalf("result %v, error %v; want a retry after %v", res, err, lifecycle.InstancePoll)
		}
		select {
		case ev := <-e.events.Events:
			if !strings.Contains(ev, "TerminationFailed") || !strings.Contains(ev, "ec2 is down") {
				t.Fatalf("event %q, want TerminationFailed with the cloud's error", ev)
			}
		default:
			t.Fatal("no event tells why the NodeClaim stays")
		}
		if !controllerutil.ContainsFinalizer(e.claim(t), v1.TerminationFinalizer) {
			t.Fatal("finalizer removed although the instance was not deleted")
		}
	})
	t.Run("the NodeClaim is gone", func(t *testing.T) {
		e := newEnv(t, interceptor.Funcs{})
		if res, err := e.finalize(t); err != nil || res.RequeueAfter != 0 || len(e.journal) != 0 {
			t.Fatalf("%v %v %v", res, err, e.journal)
		}
	})
}
