package disruption

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
)

// TestBinding checks the budget a kept node is told about: the one that
// binds, its window when it is scheduled (the latest hit before now, for
// its duration), and the nodes disrupting already.
func TestBinding(t *testing.T) {
	// A Monday, 10:30 UTC.
	now := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	cases := []struct {
		name   string
		np     *v1.NodePool
		count  PoolCount
		reason v1.DisruptionReason
		want   string
	}{
		{name: "an always-on budget", np: pool(v1.Budget{Nodes: "10%"}), count: PoolCount{Total: 5},
			want: `budgets[0] (nodes: "10%")`},
		{name: "the smallest of two", np: pool(v1.Budget{Nodes: "50%"}, v1.Budget{Nodes: "2"}), count: PoolCount{Total: 10, Disrupting: 2},
			want: `budgets[1] (nodes: "2")`},
		{name: "a scheduled window", np: pool(v1.Budget{Nodes: "10%"}, v1.Budget{Nodes: "0", Schedule: str("0 9 * * mon-fri"), Duration: dur(8 * time.Hour)}), count: PoolCount{Total: 3},
			want: `budgets[1] (nodes: "0", schedule: "0 9 * * mon-fri", duration: 8h0m0s) is active from 2026-11-23T09:00:00Z until 2026-11-23T17:00:00Z`},
		{name: "windows that follow each other end with the last", np: pool(v1.Budget{Nodes: "0", Schedule: str("0 9-16 * * mon-fri"), Duration: dur(time.Hour)}), count: PoolCount{Total: 3},
			want: `is active from 2026-11-23T10:00:00Z until 2026-11-23T17:00:00Z`},
		{name: "windows that overlap for good", np: pool(v1.Budget{Nodes: "0", Schedule: str("0 * * * *"), Duration: dur(3 * time.Hour)}), count: PoolCount{Total: 3},
			want: `is active from 2026-11-23T08:00:00Z until 2027-03-28T11:00:00Z at least (its windows overlap)`},
		{name: "a window that is closed does not bind", np: pool(v1.Budget{Nodes: "0", Schedule: str("0 12 * * *"), Duration: dur(time.Hour)}, v1.Budget{Nodes: "1"}), count: PoolCount{Total: 3},
			want: `budgets[1] (nodes: "1")`},
		{name: "a schedule that never fires allows nothing, and says so", np: pool(v1.Budget{Nodes: "5"}, v1.Budget{Nodes: "5", Schedule: str("0 0 30 2 *"), Duration: dur(time.Hour)}), count: PoolCount{Total: 3},
			want: `budgets[1] cannot be read (schedule "0 0 30 2 *" never fires;`},
		{name: "a budget of another reason", np: pool(v1.Budget{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonDrifted}}), reason: v1.DisruptionReasonUnderutilized, count: PoolCount{Total: 3},
			want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason := tc.reason
			if reason == "" {
				reason = v1.DisruptionReasonUnderutilized
			}
			got := Binding(tc.np, reason, tc.count, now)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) || strings.Contains(got, "node(s)") {
				t.Errorf("Binding = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBudgetReasonNamesTheWindow: a node a scheduled budget keeps is told
// Karpenter's words and then the budget and its window.
func TestBudgetReasonNamesTheWindow(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	np := pool(v1.Budget{Nodes: "0", Schedule: str("0 9 * * *"), Duration: dur(8 * time.Hour)})
	np.Name = "default"
	var opts Options
	if errs := opts.SetBudgets([]*v1.NodePool{np}, map[string]PoolCount{"default": {Total: 2}}, now); len(errs) > 0 {
		t.Fatal(errs)
	}
	if opts.Allowed["default"] != 0 || opts.AllowedEmpty["default"] != 0 || opts.AllowedDrift["default"] != 0 {
		t.Fatalf("allowed %v %v %v, want 0 for every reason", opts.Allowed, opts.AllowedEmpty, opts.AllowedDrift)
	}
	want := `the disruption budget of nodepool "default" allows no more disruptions now: budgets[0] (nodes: "0", schedule: "0 9 * * *", duration: 8h0m0s) is active from 2026-11-23T09:00:00Z until 2026-11-23T17:00:00Z`
	if got := opts.budgetReason("default", v1.DisruptionReasonUnderutilized); !strings.HasPrefix(got, want) {
		t.Errorf("reason %q, want it to begin %q", got, want)
	}
}
