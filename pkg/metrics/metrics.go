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
		Help: "NodeClaims Joiner has created, by why it created them (provisioned, or the disruption reason of a replacement) and by NodePool.",
	}, []string{"reason", "nodepool"})
	// NodeClaimsLaunched counts NodeClaims whose instance launched.
	NodeClaimsLaunched = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "launched_total",
		Help: "NodeClaims whose instance the cloud provider has started, by NodePool.",
	}, []string{"nodepool"})
	// NodeClaimsRegistered counts NodeClaims whose node registered.
	NodeClaimsRegistered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "registered_total",
		Help: "NodeClaims whose Node has joined the cluster, by NodePool.",
	}, []string{"nodepool"})
	// NodeClaimsInitialized counts NodeClaims whose node initialized.
	NodeClaimsInitialized = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "initialized_total",
		Help: "NodeClaims whose Node became Ready with its startup taints gone, by NodePool.",
	}, []string{"nodepool"})
	// NodeClaimsTerminated counts NodeClaims deleted, by reason.
	NodeClaimsTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "terminated_total",
		Help: "NodeClaims whose instance has been terminated and whose object is gone, by NodePool.",
	}, []string{"nodepool"})
	// NodeClaimsDisrupted counts NodeClaims disrupted, by reason.
	NodeClaimsDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "disrupted_total",
		Help: "NodeClaims removed by voluntary disruption, by reason (empty, underutilized, drifted, expired) and NodePool.",
	}, []string{"reason", "nodepool"})
	// SchedulingDuration times one provisioning plan.
	SchedulingDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "provisioner", Name: "scheduling_duration_seconds",
		Help:    "Seconds one planning pass of the scheduling core takes, for provisioning or a disruption decision.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	// UnschedulablePods is the number of pods the last plan could not place.
	UnschedulablePods = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "scheduler", Name: "unschedulable_pods_count",
		Help: "Pending pods the last provisioning plan could place on no NodePool.",
	})
	// InterruptionReceived counts interruption-queue messages by kind.
	InterruptionReceived = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "received_messages_total",
		Help: "Messages read from the interruption queue, by what they announce (spot_interrupted, rebalance_recommendation, scheduled_change, state_change, no_op).",
	}, []string{"message_type"})
	// InterruptionDeleted counts messages removed from the queue once handled.
	InterruptionDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "deleted_messages_total",
		Help: "Interruption-queue messages removed after Joiner acted on them.",
	})
	// InterruptionQueueDuration is how old a message was when handled.
	InterruptionQueueDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "message_queue_duration_seconds",
		Help:    "Seconds between AWS emitting an interruption event and Joiner acting on it.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 12),
	})
	// InstanceStatusUnhealthy counts instances EC2's status checks found
	// unhealthy, once per instance and category.
	InstanceStatusUnhealthy = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "instance_status_unhealthy_total",
		Help: "Instances of Joiner's NodeClaims that EC2's DescribeInstanceStatus reported unhealthy, counted once per instance and category (instance_status, system_status, event_status).",
	}, []string{"category"})
)

func init() {
	crmetrics.Registry.MustRegister(NodeClaimsCreated, NodeClaimsLaunched, NodeClaimsRegistered, NodeClaimsInitialized,
		NodeClaimsTerminated, NodeClaimsDisrupted, SchedulingDuration, UnschedulablePods,
		InterruptionReceived, InterruptionDeleted, InterruptionQueueDuration, InstanceStatusUnhealthy)
}
