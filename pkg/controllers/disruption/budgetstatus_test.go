package disruption

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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

// TestReportBudgetsForgetsDeletedPools: a NodePool gone since the last
// pass leaves both gauges; one still there keeps them, the nodes
// consuming its budgets counted.
func TestReportBudgetsForgetsDeletedPools(t *testing.T) {
	c := &Controller{}
	kept, gone := &v1.NodePool{}, &v1.NodePool{}
	kept.Name, gone.Name = "kept-pool", "gone-pool"
	counts := map[string]disruption.PoolCount{"kept-pool": {Total: 4, Disrupting: 1}, "gone-pool": {Total: 2}}
	c.reportBudgets([]*v1.NodePool{kept, gone}, counts, time.Now())
	c.reportBudgets([]*v1.NodePool{kept}, counts, time.Now())
	series := func(pool string) int {
		n := 0
		for _, vec := range []*prometheus.GaugeVec{metrics.NodePoolAllowedDisruptions, metrics.NodePoolNodesConsumingBudgets} {
			ch := make(chan prometheus.Metric, 100)
			vec.Collect(ch)
			close(ch)
			for m := range ch {
				var out dto.Metric
				_ = m.Write(&out)
				for _, l := range out.Label {
					if l.GetName() == "nodepool" && l.GetValue() == pool {
						n++
					}
				}
			}
		}
		return n
	}
	if n := series("gone-pool"); n != 0 {
		t.Errorf("the deleted pool still has %d series", n)
	}
	if n := series("kept-pool"); n != 6 {
		t.Errorf("the kept pool has %d series, want 6 (two gauges, three reasons)", n)
	}
	if got := testutil.ToFloat64(metrics.NodePoolNodesConsumingBudgets.WithLabelValues("kept-pool", "Drifted")); got != 1 {
		t.Errorf("nodes_consuming_budgets = %v, want the 1 disrupting", got)
	}
}
