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
