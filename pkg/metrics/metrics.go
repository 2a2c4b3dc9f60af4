// Package metrics defines Joiner's Prometheus metrics under Karpenter's
// names and labels, so existing dashboards and alerts keep working. They are
// served with controller-runtime's on the metrics port.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// NodeClaimsCreated counts NodeClaims created, by reason and NodePool.
	NodeClaimsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "created_total",
		Help: "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created and the owning nodepool.",
	}, []string{"reason", "nodepool"})
	// NodeClaimsLaunched counts NodeClaims whose instance launched.
	NodeClaimsLaunched = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "launched_total",
		Help: "Number of nodeclaims launched in total by Karpenter. Labeled by the owning nodepool.",
	}, []string{"nodepool"})
	// NodeClaimsRegistered counts NodeClaims whose node registered.
	NodeClaimsRegistered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "registered_total",
		Help: "Number of nodeclaims registered in total by Karpenter. Labeled by the owning nodepool.",
	}, []string{"nodepool"})
	// NodeClaimsInitialized counts NodeClaims whose node initialized.
	NodeClaimsInitialized = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "initialized_total",
		Help: "Number of nodeclaims initialized in total by Karpenter. Labeled by the owning nodepool.",
	}, []string{"nodepool"})
	// NodeClaimsTerminated counts NodeClaims deleted, by reason.
	NodeClaimsTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "terminated_total",
		Help: "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool.",
	}, []string{"nodepool"})
	// NodeClaimsDisrupted counts NodeClaims disrupted, by reason.
	NodeClaimsDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "disrupted_total",
		Help: "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted and the owning nodepool.",
	}, []string{"reason", "nodepool"})
	// SchedulingDuration times one provisioning plan.
	SchedulingDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "provisioner", Name: "scheduling_duration_seconds",
		Help:    "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	// UnschedulablePods is the number of pods the last plan could not place.
	UnschedulablePods = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "scheduler", Name: "unschedulable_pods_count",
		Help: "The number of unschedulable Pods.",
	})
)

func init() {
	crmetrics.Registry.MustRegister(NodeClaimsCreated, NodeClaimsLaunched, NodeClaimsRegistered, NodeClaimsInitialized,
		NodeClaimsTerminated, NodeClaimsDisrupted, SchedulingDuration, UnschedulablePods)
}
