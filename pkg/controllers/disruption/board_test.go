package disruption

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/explain"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestBoardRecordsEachNode: a pass puts its word on every node it saw on
// the Board, the move for the node it disrupts and the reason for each
// node it keeps, as `joiner explain node` serves them.
func TestBoardRecordsEachNode(t *testing.T) {
	var objs []client.Object
	for _, name := range []string{"idle", "protected", "fresh", "recent"} {
		node, nc := nodeAndClaim(name, "c6a.large", name != "fresh")
		switch name {
		case "protected":
			node.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
		case "recent":
			meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeConsolidatable)
			nc.Status.LastPodEventTime = metav1.NewTime(time.Date(2026, 1, 1, 11, 58, 0, 0, time.UTC))
		}
		objs = append(objs, node, nc)
	}
	w := newWorld(t, "100%", objs...)
	pool := &v1.NodePool{}
	if err := w.kube.Get(context.Background(), client.ObjectKey{Name: "default"}, pool); err != nil {
		t.Fatal(err)
	}
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("10m")
	if err := w.kube.Update(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	w.c.Board = &explain.Board{}
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		node, verdict, want string
	}{
		{"idle", explain.Disrupting, "delete"},
		{"protected", explain.Kept, `node has "karpenter.sh/do-not-disrupt: true"`},
		{"fresh", explain.Kept, "not initialized"},
		{"recent", explain.Kept, "consolidateAfter (10m0s) has not passed: its pods last changed at 2026-01-01T11:58:00Z, so it may be consolidated from 2026-01-01T12:08:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.node, func(t *testing.T) {
			n, ok := w.c.Board.Node(tc.node)
			if !ok {
				t.Fatalf("no word on %s", tc.node)
			}
			if n.Verdict != tc.verdict || !strings.Contains(n.Reason+" "+n.Move, tc.want) || n.NodeClaim != tc.node || n.NodePool != "default" {
				t.Errorf("%+v, want %s with %q", n, tc.verdict, tc.want)
			}
		})
	}
}

// TestBoardKeepsTheMoveUnderway: while a command runs, the passes after
// the one that started it still say its move for its candidate, not that
// a command is underway: `joiner explain` shows what is being done.
func TestBoardKeepsTheMoveUnderway(t *testing.T) {
	w := newWorld(t, "100%", replaceable()...)
	w.c.Board = &explain.Board{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd, err := w.c.Pass(ctx)
	if err != nil || cmd == nil {
		t.Fatalf("the first pass started no command (%v); events:\n%s", err, w.events())
	}
	first, _ := w.c.Board.Node("old")
	deadline := time.Now().Add(30 * time.Second)
	for alive, _ := w.replacements(); alive == 0 || !w.fc.HasWaiters(); alive, _ = w.replacements() {
		if time.Now().After(deadline) {
			t.Fatal("the command never launched its replacement and waited")
		}
		time.Sleep(time.Millisecond)
	}
	if again, err := w.c.Pass(ctx); err != nil || again != nil {
		t.Fatalf("a second pass started a command (%v)", err)
	}
	n, _ := w.c.Board.Node("old")
	if first.Verdict != explain.Disrupting || !strings.HasPrefix(first.Move, "replace with c6a.large (on-demand, ") || n != first {
		t.Errorf("first pass %+v, second %+v: want the replacement by a c6a.large in both", first, n)
	}
	cancel()
	<-cmd
	w.c.Wait()
}
