package disruption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCommandsRunTogether: a drift waits for its replacement, which does
// not initialize; meanwhile a node goes empty, and the next pass deletes
// it beside the drift, as Karpenter's queue runs commands, when the budget
// leaves room for both. The budget stays the limit: at one node, the
// drift under way holds it, and the empty node stays with the reason.
func TestCommandsRunTogether(t *testing.T) {
	for _, tc := range []struct {
		budget    string
		wantEmpty bool
	}{
		{budget: "2", wantEmpty: true},
		{budget: "1", wantEmpty: false},
	} {
		t.Run("budget "+tc.budget, func(t *testing.T) {
			old, oldClaim := nodeAndClaim("old", "c6a.2xlarge", true)
			drifted(oldClaim)
			other, otherClaim := nodeAndClaim("other", "c6a.large", true)
			// other-0 leaves no room on other for inflate-0: the drift needs
			// a replacement.
			w := newWorld(t, tc.budget, old, oldClaim, boundPod("inflate-0", "old", "1"), other, otherClaim, boundPod("other-0", "other", "1500m"))
			ctx, cancel := context.WithCancel(context.Background())
			drift := w.driftUnderway(ctx)
			if err := w.kube.Delete(ctx, boundPod("other-0", "other", "1500m")); err != nil {
				t.Fatal(err)
			}
			empty, err := w.c.Pass(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.wantEmpty {
				if empty != nil {
					t.Fatal("a second command started beyond the budget of one node")
				}
				if ev := w.events(); !strings.Contains(ev, `DisruptionBlocked the disruption budget of nodepool "default" allows no more disruptions now`) {
					t.Fatalf("the empty node stays without its reason; events:\n%s", ev)
				}
			} else {
				if empty == nil {
					t.Fatalf("no command for the empty node while the drift waits; events:\n%s", w.events())
				}
				if err := <-empty; err != nil {
					t.Fatal(err)
				}
				if w.claim("other") != nil {
					t.Fatal("the empty node's NodeClaim is still there")
				}
			}
			// The drift is still under way: its candidate untouched but
			// tainted, its replacement waited for.
			if nc := w.claim("old"); nc == nil || nc.DeletionTimestamp != nil || !w.tainted("old") {
				t.Fatal("the drift's candidate is not held by its command")
			}
			if again, err := w.c.Pass(ctx); err != nil || again != nil {
				t.Fatalf("a further pass started a command (%v) with the drift's candidate under way", err)
			}
			cancel()
			<-drift
			w.c.Wait()
			if w.tainted("old") {
				t.Fatal("the drift cut short left its candidate tainted")
			}
		})
	}
}

var _ client.Object = (*v1.NodeClaim)(nil)

// TestInitializedReplacementsTakeTheirPods: once a drift's replacement has
// initialized, and before its candidate is deleted, the candidate's pods
// hold the replacement's room. A pass in that window found the replacement
// empty: it planned the next drift's pod into it (a deletion, which the
// recheck abandoned 15 s later), or deleted it as empty.
func TestInitializedReplacementsTakeTheirPods(t *testing.T) {
	for _, consolidatable := range []bool{false, true} {
		t.Run(fmt.Sprintf("replacement consolidatable %v", consolidatable), func(t *testing.T) {
			old, oldClaim := nodeAndClaim("old", "c6a.2xlarge", true)
			drifted(oldClaim)
			w := newWorld(t, "2", old, oldClaim, boundPod("inflate-0", "old", "1"))
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); w.c.Wait() }()
			w.driftUnderway(ctx)
			// A second drifted node, whose pod would fit beside nothing
			// else on the replacement (a c6a.large).
			old2, old2Claim := nodeAndClaim("old2", "c6a.2xlarge", true)
			drifted(old2Claim)
			for _, o := range []client.Object{old2, old2Claim, boundPod("inflate-1", "old2", "1")} {
				if err := w.kube.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			// The replacement initializes; the command has not looked yet
			// (it waits on the clock), so its candidate is not deleted.
			var claims v1.NodeClaimList
			if err := w.kube.List(ctx, &claims); err != nil {
				t.Fatal(err)
			}
			var repl string
			for i := range claims.Items {
				if nc := &claims.Items[i]; nc.GenerateName != "" {
					w.initialize(ctx, w.kube, nc)
					repl = nc.Name
					if !consolidatable {
						stored := nc.DeepCopy()
						meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeConsolidatable)
						if err := w.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			cmd, _, err := w.c.decide(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if cmd == nil {
				t.Fatalf("no command for old2; events:\n%s", w.events())
			}
			var names []string
			for _, c := range cmd.Candidates {
				names = append(names, c.NodeClaim)
			}
			if len(names) != 1 || names[0] != "old2" || len(cmd.Replacements) != 1 {
				t.Fatalf("the second command disrupts %v (replacement %s) with %d replacements; want old2 replaced, its pod kept off the room of old's", names, repl, len(cmd.Replacements))
			}
		})
	}
}

// drifted marks the NodeClaim drifted since 11:30.
func drifted(nc *v1.NodeClaim) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
		Reason: "NodeClassDrift", LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 11, 30, 0, 0, time.UTC))})
}

// driftUnderway makes a pass whose drift launches a replacement, and
// returns its result channel once the command has created the replacement
// and waits on the clock for it to initialize.
func (w *world) driftUnderway(ctx context.Context) <-chan error {
	w.t.Helper()
	drift, err := w.c.Pass(ctx)
	if err != nil || drift == nil {
		w.t.Fatalf("the first pass started no command (%v); events:\n%s", err, w.events())
	}
	deadline := time.Now().Add(30 * time.Second)
	for alive, _ := w.replacements(); alive == 0 || !w.fc.HasWaiters(); alive, _ = w.replacements() {
		if time.Now().After(deadline) {
			w.t.Fatal("the drift never launched its replacement and waited")
		}
		time.Sleep(time.Millisecond)
	}
	return drift
}
