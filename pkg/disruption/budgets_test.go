package disruption

import (
	"math"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pool(budgets ...v1.Budget) *v1.NodePool {
	return &v1.NodePool{Spec: v1.NodePoolSpec{Disruption: v1.Disruption{Budgets: budgets}}}
}

func str(s string) *string { return &s }

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestAllowed(t *testing.T) {
	// A Monday, 10:30 UTC.
	now := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	cases := []struct {
		name    string
		np      *v1.NodePool
		reason  v1.DisruptionReason
		nodes   int
		want    int
		wantErr bool
	}{
		{name: "default 10% rounds up", np: pool(v1.Budget{Nodes: "10%"}), nodes: 5, want: 1},
		{name: "10% of 30", np: pool(v1.Budget{Nodes: "10%"}), nodes: 30, want: 3},
		{name: "zero blocks everything", np: pool(v1.Budget{Nodes: "0"}), nodes: 10, want: 0},
		{name: "a count", np: pool(v1.Budget{Nodes: "3"}), nodes: 100, want: 3},
		{name: "100%", np: pool(v1.Budget{Nodes: "100%"}), nodes: 7, want: 7},
		{name: "no budgets: no limit", np: pool(), nodes: 7, want: math.MaxInt},
		{name: "most restrictive wins", np: pool(v1.Budget{Nodes: "50%"}, v1.Budget{Nodes: "2"}), nodes: 10, want: 2},
		{name: "inside a schedule window", np: pool(v1.Budget{Nodes: "0", Schedule: str("0 9 * * *"), Duration: dur(2 * time.Hour)}), nodes: 10, want: 0},
		{name: "outside a schedule window", np: pool(v1.Budget{Nodes: "0", Schedule: str("0 9 * * *"), Duration: dur(time.Hour)}), nodes: 10, want: math.MaxInt},
		{name: "window and an always-on budget", np: pool(v1.Budget{Nodes: "0", Schedule: str("0 12 * * *"), Duration: dur(time.Hour)}, v1.Budget{Nodes: "10%"}), nodes: 10, want: 1},
		{name: "macro schedule", np: pool(v1.Budget{Nodes: "1", Schedule: str("@daily"), Duration: dur(11 * time.Hour)}), nodes: 10, want: 1},
		{name: "weekday schedule not today", np: pool(v1.Budget{Nodes: "0", Schedule: str("0 0 * * 6"), Duration: dur(24 * time.Hour)}), nodes: 10, want: math.MaxInt},
		{name: "reason-scoped budget applies to its reason", np: pool(v1.Budget{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonDrifted}}), reason: v1.DisruptionReasonDrifted, nodes: 10, want: 0},
		{name: "reason-scoped budget ignores other reasons", np: pool(v1.Budget{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonDrifted}}), reason: v1.DisruptionReasonUnderutilized, nodes: 10, want: math.MaxInt},
		{name: "a schedule that never fires fails closed", np: pool(v1.Budget{Nodes: "5", Schedule: str("0 0 30 2 *"), Duration: dur(time.Hour)}), nodes: 10, want: 0, wantErr: true},
		{name: "bad schedule fails closed", np: pool(v1.Budget{Nodes: "5", Schedule: str("every day"), Duration: dur(time.Hour)}), nodes: 10, want: 0, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason := tc.reason
			if reason == "" {
				reason = v1.DisruptionReasonUnderutilized
			}
			got, err := Allowed(tc.np, reason, tc.nodes, now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("allowed %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCountBudgets(t *testing.T) {
	ready := BudgetNode{NodePool: "a", Initialized: true, Ready: true}
	with := func(f func(*BudgetNode)) BudgetNode { n := ready; f(&n); return n }
	cases := []struct {
		name  string
		nodes []BudgetNode
		want  PoolCount
	}{
		{name: "initialized, Ready nodes count and are not disrupting", nodes: []BudgetNode{ready, ready}, want: PoolCount{Total: 2}},
		{name: "a replacement still launching is not counted", nodes: []BudgetNode{ready, with(func(n *BudgetNode) { n.Initialized, n.Ready = false, false })}, want: PoolCount{Total: 1}},
		{name: "a NotReady node counts as disrupting", nodes: []BudgetNode{ready, with(func(n *BudgetNode) { n.Ready = false })}, want: PoolCount{Total: 2, Disrupting: 1}},
		{name: "a node marked for deletion counts as disrupting", nodes: []BudgetNode{ready, with(func(n *BudgetNode) { n.MarkedForDeletion = true })}, want: PoolCount{Total: 2, Disrupting: 1}},
		{name: "a node whose instance is terminating is not counted at all", nodes: []BudgetNode{ready, with(func(n *BudgetNode) { n.MarkedForDeletion, n.InstanceTerminating = true, true })}, want: PoolCount{Total: 1}},
		{name: "nodes of no pool are not counted", nodes: []BudgetNode{ready, with(func(n *BudgetNode) { n.NodePool = "" })}, want: PoolCount{Total: 1}},
		{name: "other pools are counted apart", nodes: []BudgetNode{ready, with(func(n *BudgetNode) { n.NodePool, n.Ready = "b", false })}, want: PoolCount{Total: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CountBudgets(tc.nodes)["a"]; got != tc.want {
				t.Fatalf("pool a counts %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRemaining(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	cases := []struct {
		name  string
		np    *v1.NodePool
		count PoolCount
		want  int
	}{
		{name: "10% of 10 initialized nodes, none disrupting", np: pool(v1.Budget{Nodes: "10%"}), count: PoolCount{Total: 10}, want: 1},
		{name: "10% of 10, one NotReady: none left", np: pool(v1.Budget{Nodes: "10%"}), count: PoolCount{Total: 10, Disrupting: 1}, want: 0},
		{name: "more disrupting than allowed is zero, not negative", np: pool(v1.Budget{Nodes: "1"}), count: PoolCount{Total: 10, Disrupting: 3}, want: 0},
		{name: "a count less those disrupting", np: pool(v1.Budget{Nodes: "5"}), count: PoolCount{Total: 10, Disrupting: 2}, want: 3},
		// Ten nodes and a launching replacement: counting the replacement
		// would round 10% of 11 up to 2.
		{name: "launching replacements do not round a percentage up", np: pool(v1.Budget{Nodes: "10%"}), count: CountBudgets(append(repeat(BudgetNode{NodePool: "a", Initialized: true, Ready: true}, 10), BudgetNode{NodePool: "a"}))["a"], want: 1},
		{name: "no budgets: no limit", np: pool(), count: PoolCount{Total: 10, Disrupting: 2}, want: math.MaxInt - 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Remaining(tc.np, v1.DisruptionReasonUnderutilized, tc.count, now)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("remaining %d, want %d", got, tc.want)
			}
		})
	}
	if n, err := Remaining(pool(v1.Budget{Nodes: "5", Schedule: str("every day"), Duration: dur(time.Hour)}), v1.DisruptionReasonUnderutilized, PoolCount{Total: 10}, now); err == nil || n != 0 {
		t.Fatalf("a bad schedule: %d, %v; want 0 and an error", n, err)
	}
}

func repeat(n BudgetNode, k int) []BudgetNode {
	out := make([]BudgetNode, k)
	for i := range out {
		out[i] = n
	}
	return out
}
