package aws

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

// dashboardMetrics are the 20 metric names Karpenter's getting-started
// Grafana dashboards query (capacity, performance, controllers and
// allocation; the list is ../shared/reference/karpenter-install/
// dashboard-metrics.txt), each with the labels those queries select or
// group by.
var dashboardMetrics = map[string][]string{
	"karpenter_nodes_allocatable":                                 {"resource_type", "arch", "capacity_type", "instance_type", "nodepool", "zone", "node_name"},
	"karpenter_nodes_total_pod_requests":                          {"resource_type", "arch", "capacity_type", "instance_type", "nodepool", "zone"},
	"karpenter_nodes_total_daemon_requests":                       {"resource_type", "arch", "capacity_type", "instance_type", "nodepool", "zone"},
	"karpenter_pods_state":                                        {"arch", "capacity_type", "instance_type", "namespace", "node", "nodepool", "zone", "phase"},
	"karpenter_pods_startup_duration_seconds":                     {"quantile"},
	"karpenter_nodes_termination_duration_seconds":                {"quantile"},
	"karpenter_nodes_created_total":                               {"nodepool"},
	"karpenter_nodes_terminated_total":                            {"nodepool"},
	"karpenter_nodepools_usage":                                   {"nodepool", "resource_type"},
	"karpenter_nodepools_limit":                                   {"nodepool", "resource_type"},
	"karpenter_nodeclaims_disrupted_total":                        {"nodepool", "reason"},
	"karpenter_voluntary_disruption_decisions_total":              {"consolidation_type", "decision", "reason"},
	"karpenter_voluntary_disruption_eligible_nodes":               {"reason"},
	"karpenter_allocation_controller_scheduling_duration_seconds": {"provisioner", "le"},
	"karpenter_allocation_controller_binpacking_duration_seconds": {"le"},
	"karpenter_allocation_controller_bind_duration_seconds":       {"le"},
	"controller_runtime_reconcile_time_seconds":                   {"controller", "le"},
	"controller_runtime_reconcile_total":                          {"controller"},
	"controller_runtime_reconcile_errors_total":                   {"controller"},
	"workqueue_depth":                                             {"name"},
}

// checkDashboardMetrics waits until Joiner's /metrics serves every
// dashboard metric with a series that has the dashboards' labels, and
// returns the families it read.
func checkDashboardMetrics(t *testing.T, port int) map[string]*dto.MetricFamily {
	t.Helper()
	var families map[string]*dto.MetricFamily
	framework.Eventually(t, time.Minute, "/metrics serves every dashboard metric with its labels", func() (bool, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err = parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return false, err.Error()
		}
		var missing []string
		for name, want := range dashboardMetrics {
			if why := seriesWith(families[name], want); why != "" {
				missing = append(missing, name+": "+why)
			}
		}
		sort.Strings(missing)
		return len(missing) == 0, strings.Join(missing, "; ")
	})
	return families
}

// seriesWith says why no series of the family carries every label in want
// ("le" and "quantile" stand for a histogram's buckets and a summary's
// quantiles); empty when one does.
func seriesWith(f *dto.MetricFamily, want []string) string {
	if f == nil || len(f.Metric) == 0 {
		return "not served"
	}
	for _, m := range f.Metric {
		have := map[string]bool{}
		for _, l := range m.Label {
			have[l.GetName()] = true
		}
		if m.Histogram != nil && len(m.Histogram.Bucket) > 0 {
			have["le"] = true
		}
		if m.Summary != nil && len(m.Summary.Quantile) > 0 {
			have["quantile"] = true
		}
		ok := true
		for _, w := range want {
			ok = ok && have[w]
		}
		if ok {
			return ""
		}
	}
	var labels []string
	for _, l := range f.Metric[0].Label {
		labels = append(labels, l.GetName())
	}
	return fmt.Sprintf("no series with %v (one has %v)", want, slices.Sorted(slices.Values(labels)))
}

// sumOf adds the values of the family's series that carry every label in
// match: counters, gauges and untyped alike.
func sumOf(f *dto.MetricFamily, match map[string]string) float64 {
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range match {
			ok = ok && have[k] == v
		}
		if !ok {
			continue
		}
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return sum
}
