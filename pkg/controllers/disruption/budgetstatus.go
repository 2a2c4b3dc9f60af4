package disruption

import (
	"fmt"
	"math"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// reportBudgets tells, as Karpenter does on every pass, what each
// NodePool's budgets allow for each reason: the allowed_disruptions and
// nodes_consuming_budgets gauges, and a DisruptionBlocked event on a pool
// with nodes whose budgets allow none ("No allowed disruptions for
// disruption reason Underutilized due to blocking budget"), which the
// recorder gives once per window.
func (c *Controller) reportBudgets(pools []*v1.NodePool, counts map[string]disruption.PoolCount, now time.Time) {
	// A NodePool gone since the last pass leaves the gauges.
	current := map[string]bool{}
	for _, np := range pools {
		current[np.Name] = true
	}
	for name := range c.reported {
		if !current[name] {
			metrics.NodePoolAllowedDisruptions.DeletePartialMatch(prometheus.Labels{"nodepool": name})
			metrics.NodePoolNodesConsumingBudgets.DeletePartialMatch(prometheus.Labels{"nodepool": name})
		}
	}
	c.reported = current
	for _, np := range pools {
		count := counts[np.Name]
		for _, reason := range disruption.BudgetReasons {
			allowed, err := disruption.Allowed(np, reason, count.Total, now)
			if err != nil {
				allowed = 0
			}
			metrics.NodePoolAllowedDisruptions.WithLabelValues(np.Name, string(reason)).Set(float64(min(allowed, math.MaxInt32)))
			metrics.NodePoolNodesConsumingBudgets.WithLabelValues(np.Name, string(reason)).Set(float64(count.Disrupting))
			if count.Total > 0 && allowed == 0 && c.Recorder != nil {
				c.Recorder.Event(np, corev1.EventTypeNormal, "DisruptionBlocked",
					fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget", reason))
			}
		}
	}
}
