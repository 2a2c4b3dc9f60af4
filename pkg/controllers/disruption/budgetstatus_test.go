package disruption

import (
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestReportBudgets: every pass sets Karpenter's allowed_disruptions and
// nodes_consuming_budgets gauges per reason, and a pool whose budgets
// allow no disruption while it has nodes gets Karpenter's DisruptionBlocked
// event.
func TestReportBudgets(t *testing.T) {
	cases := []struct {
		name        string
		budget      string
		wantAllowed float64
		wantEvent   bool
	}{
		{name: "a zero budget blocks the pool", budget: "0", wantAllowed: 0, wantEvent: true},
		{name: "half of two nodes", budget: "50%", wantAllowed: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			for _, name := range []string{"a", "b"} {
				node, nc := nodeAndClaim(name, "c6a.xlarge", true)
				objs = append(objs, node, nc, boundPod(name+"-0", name, "3"))
			}
			w := newWorld(t, tc.budget, objs...)
			if err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			for _, reason := range []string{"Empty", "Underutilized", "Drifted"} {
				if got := testutil.ToFloat64(metrics.NodePoolAllowedDisruptions.WithLabelValues("default", reason)); got != tc.wantAllowed {
					t.Errorf("allowed_disruptions{reason=%s} = %v, want %v", reason, got, tc.wantAllowed)
				}
				if got := testutil.ToFloat64(metrics.NodePoolNodesConsumingBudgets.WithLabelValues("default", reason)); got != 0 {
					t.Errorf("nodes_consuming_budgets{reason=%s} = %v, want 0", reason, got)
				}
			}
			ev := w.events()
			if got := strings.Contains(ev, "DisruptionBlocked No allowed disruptions for disruption reason Underutilized due to blocking budget"); got != tc.wantEvent {
				t.Errorf("the pool's blocking-budget event: %v, want %v; events:\n%s", got, tc.wantEvent, ev)
			}
		})
	}
}
