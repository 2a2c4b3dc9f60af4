package state

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func pending(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
}

func TestNominations(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := &Nominations{Clock: fc, Window: 20 * time.Second}
	n.NominateNodeClaim("nc-1", pending("b"), pending("a"))
	n.NominateSnapshotNode(InFlightName("nc-2"), pending("c"))
	n.NominateSnapshotNode("node-3", pending("d"))
	steps := []struct {
		name            string
		advance         time.Duration
		renew           bool
		node, nodeClaim string
		want            []string
	}{
		{name: "a NodeClaim launched for pods", node: "node-1", nodeClaim: "nc-1", want: []string{"default/a", "default/b"}},
		{name: "an in-flight NodeClaim, named as the snapshot names it", nodeClaim: "nc-2", want: []string{"default/c"}},
		{name: "an existing node", node: "node-3", nodeClaim: "nc-3", want: []string{"default/d"}},
		{name: "another node", node: "node-4", nodeClaim: "nc-4", want: []string{}},
		{name: "within the window", advance: 19 * time.Second, node: "node-1", nodeClaim: "nc-1", want: []string{"default/a", "default/b"}},
		{name: "renewed by the next batch", renew: true, advance: 15 * time.Second, node: "node-1", nodeClaim: "nc-1", want: []string{"default/a", "default/b", "default/e"}},
		{name: "others expired", nodeClaim: "nc-2", want: []string{}},
		{name: "expired", advance: 21 * time.Second, node: "node-1", nodeClaim: "nc-1", want: []string{}},
	}
	for _, s := range steps {
		if s.renew {
			n.NominateNodeClaim("nc-1", pending("e"))
		}
		fc.Step(s.advance)
		got := n.For(s.node, s.nodeClaim)
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, got, s.want)
		}
	}
	var none *Nominations
	none.NominateNode("x", pending("a"))
	if got := none.For("x", ""); len(got) != 0 {
		t.Fatalf("nil nominations: %v", got)
	}
}

// TestNominationLapses: nominated again after its window passed, a node
// is nominated for its new pods alone, whether or not the lapsed
// nomination was pruned meanwhile (pruning runs once a window).
func TestNominationLapses(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := &Nominations{Clock: fc, Window: 20 * time.Second}
	n.NominateNode("other", pending("z")) // prunes at 0 s
	fc.Step(5 * time.Second)
	n.NominateNodeClaim("nc-1", pending("a")) // lapses at 25 s
	fc.Step(15 * time.Second)
	n.NominateNode("other", pending("z")) // prunes at 20 s, next at 40 s
	fc.Step(10 * time.Second)
	n.NominateNodeClaim("nc-1", pending("b"))
	if got, want := n.For("", "nc-1"), []string{"default/b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("renewed at 30 s after lapsing at 25 s: %v, want %v", got, want)
	}
}

func TestNominationWindow(t *testing.T) {
	for _, tc := range []struct{ batchMax, resync, want time.Duration }{
		{10 * time.Second, 10 * time.Second, 20 * time.Second},
		{time.Second, 0, 10 * time.Second},
		{time.Second, 10 * time.Second, 20 * time.Second},
		{30 * time.Second, 10 * time.Second, time.Minute},
	} {
		if got := NominationWindow(tc.batchMax, tc.resync); got != tc.want {
			t.Errorf("NominationWindow(%s, %s) = %s, want %s", tc.batchMax, tc.resync, got, tc.want)
		}
	}
}

// TestTargets: a pod nominated twice is taken to be where it was nominated
// last, even when its earlier node was nominated again for other pods; a
// nomination tells plans where its pods go for TargetFor, long past the
// Window, and is then forgotten.
func TestTargets(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := &Nominations{Clock: fc, Window: 20 * time.Second}
	n.NominateNode("node-1", pending("b"), pending("c"))
	n.NominateNodeClaim("nc-1", pending("a"), pending("b"))
	fc.Step(time.Second)
	// The next batch moves a to node-2, keeps c on node-1 and renews nc-1
	// for e.
	n.NominateNode("node-2", pending("a"))
	n.NominateNode("node-1", pending("c"))
	n.NominateNodeClaim("nc-1", pending("e"))
	n.NominateNodeClaim("nc-3", pending("d"))
	steps := []struct {
		advance time.Duration
		want    map[string]Target
	}{
		{want: map[string]Target{"default/a": {Node: "node-2"}, "default/b": {NodeClaim: "nc-1"}, "default/c": {Node: "node-1"},
			"default/d": {NodeClaim: "nc-3"}, "default/e": {NodeClaim: "nc-1"}}},
		{advance: TargetFor - 1500*time.Millisecond, want: map[string]Target{"default/a": {Node: "node-2"}, "default/b": {NodeClaim: "nc-1"},
			"default/c": {Node: "node-1"}, "default/d": {NodeClaim: "nc-3"}, "default/e": {NodeClaim: "nc-1"}}},
		{advance: time.Second, want: map[string]Target{"default/a": {Node: "node-2"}, "default/c": {Node: "node-1"}, "default/d": {NodeClaim: "nc-3"},
			"default/e": {NodeClaim: "nc-1"}}},
		{advance: time.Second, want: map[string]Target{}},
	}
	for i, s := range steps {
		fc.Step(s.advance)
		if got := n.Targets(); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d: %v, want %v", i, got, s.want)
		}
	}
	n.NominateNode("node-9", pending("z"))
	if len(n.byName) != 1 || len(n.targets) != 1 {
		t.Fatalf("%d nominations and %d targets kept, want only node-9's: %v, %v", len(n.byName), len(n.targets), n.byName, n.targets)
	}
	var none *Nominations
	if got := none.Targets(); got != nil {
		t.Fatalf("nil nominations: %v", got)
	}
}
