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
		Help: "NodeClaims removed by disruption, by reason (empty, underutilized, drifted, expired, unhealthy, a status-check category), NodePool and capacity type.",
	}, []string{"reason", "nodepool", "capacity_type"})
	// NodesCreated counts Nodes that registered for a NodeClaim.
	NodesCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "created_total",
		Help: "Nodes that joined the cluster for one of Joiner's NodeClaims, by NodePool.",
	}, []string{"nodepool"})
	// NodesTerminated counts Nodes whose termination finalizer Joiner removed.
	NodesTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "terminated_total",
		Help: "Nodes Joiner drained and let go, by NodePool.",
	}, []string{"nodepool"})
	// NodesTerminationDuration is a summary, as Karpenter's is: the
	// performance dashboard reads its quantiles directly.
	NodesTerminationDuration = prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "termination_duration_seconds",
		Help:       "Seconds from a Node's deletion to the removal of its finalizer (drain and instance termination), by NodePool.",
		Objectives: summaryObjectives,
	}, []string{"nodepool"})
	// PodsStartupDuration is a summary for the same reason.
	PodsStartupDuration = prometheus.NewSummary(prometheus.SummaryOpts{
		Namespace: "karpenter", Subsystem: "pods", Name: "startup_duration_seconds",
		Help:       "Seconds from a pod's creation to its Running phase, each pod once.",
		Objectives: summaryObjectives,
	})
	// DisruptionDecisions counts the commands the disruption controller
	// carried out.
	DisruptionDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "decisions_total",
		Help: "Voluntary disruption commands carried out, by decision (delete, replace), reason (empty, underutilized, drifted) and consolidation type (empty, single, multi; empty for drift).",
	}, []string{"decision", "reason", "consolidation_type"})
	// DisruptionEligibleNodes is set on every disruption pass.
	DisruptionEligibleNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "eligible_nodes",
		Help: "Nodes the last disruption pass could disrupt for each reason (empty, underutilized, drifted).",
	}, []string{"reason"})
	// NodePoolAllowedDisruptions and NodePoolNodesConsumingBudgets are set
	// on every disruption pass, for each NodePool and reason (Empty,
	// Underutilized, Drifted), as Karpenter's are: what the budgets allow
	// before the nodes already disrupting (2147483647 when no budget
	// applies), and those nodes.
	NodePoolAllowedDisruptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "allowed_disruptions",
		Help: "Nodes of a NodePool its disruption budgets let be disrupting at once, by NodePool and reason.",
	}, []string{"nodepool", "reason"})
	NodePoolNodesConsumingBudgets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "nodes_consuming_budgets",
		Help: "Nodes of a NodePool that use up its disruption budgets (NotReady, or being disrupted), by NodePool and reason.",
	}, []string{"nodepool", "reason"})
	// The allocation controller's three histograms are what Karpenter's
	// getting-started "allocation" dashboard still queries, from before
	// NodePools; Karpenter no longer serves them, Joiner does, so that
	// dashboard draws. provisioner is the NodePool.
	AllocationScheduling = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "allocation_controller", Name: "scheduling_duration_seconds",
		Help:    "Seconds one provisioning pass took, from reading the pending pods to creating its NodeClaims, by NodePool (provisioner) of the NodeClaims it created.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"provisioner"})
	AllocationBinpacking = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "allocation_controller", Name: "binpacking_duration_seconds",
		Help:    "Seconds the scheduling core took to pack one provisioning pass's pods onto nodes.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	AllocationBind = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "allocation_controller", Name: "bind_duration_seconds",
		Help:    "Seconds from a pod's nomination to a NodeClaim Joiner created to kube-scheduler binding it, each pod once.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 14),
	})
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

// The cloud provider's metrics, Karpenter's karpenter_cloudprovider_*.
var (
	CloudProviderDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "duration_seconds",
		Help:    "Seconds each cloud provider call took, by method and provider.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"controller", "method", "provider"})
	CloudProviderErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "errors_total",
		Help: "Cloud provider calls that failed, by method, provider and error kind.",
	}, []string{"controller", "method", "provider", "error"})
	// InstanceLaunchFailures counts the offerings a CreateFleet call could
	// not launch (one call may fail several types and zones), as
	// Karpenter's AWS provider counts them.
	InstanceLaunchFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "instance_launch_failures_total",
		Help: "Offerings a fleet launch could not launch, by zone, zone ID, capacity type and reason.",
	}, []string{"zone", "zone_id", "capacity_type", "reason"})
	// InstanceTerminationFailures counts failed TerminateInstances calls.
	InstanceTerminationFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "instance_termination_failures_total",
		Help: "Instance terminations EC2 refused, by zone and zone ID.",
	}, []string{"zone", "zone_id"})
	BatchTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "batcher_batch_time_seconds",
		Help:    "Seconds a batch of AWS requests waited to fill, by batcher.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 12),
	}, []string{"batcher"})
	BatchSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "batcher_batch_size",
		Help:    "Requests in each batch, by batcher.",
		Buckets: []float64{1, 2, 4, 5, 10, 20, 40, 50, 100, 200, 400, 500, 1000},
	}, []string{"batcher"})
	// EC2NodeClassUserDataBytes is the size of the user data of the class's
	// newest launch template, which EC2 caps at 16 KiB.
	EC2NodeClassUserDataBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "ec2nodeclasses", Name: "userdata_bytes",
		Help: "Bytes of user data (decoded) in the EC2NodeClass's latest launch template; EC2 refuses more than 16384.",
	}, []string{"nodeclass"})
)

// summaryObjectives are the quantiles Karpenter's summaries publish, with
// their tolerated errors.
var summaryObjectives = map[float64]float64{0: 0, 0.5: 0.05, 0.9: 0.01, 0.99: 0.001, 1: 0}

func init() {
	crmetrics.Registry.MustRegister(NodeClaimsCreated, NodeClaimsLaunched, NodeClaimsRegistered, NodeClaimsInitialized,
		NodeClaimsTerminated, NodeClaimsDisrupted, SchedulingDuration, UnschedulablePods,
		InterruptionReceived, InterruptionDeleted, InterruptionQueueDuration, InstanceStatusUnhealthy,
		NodesCreated, NodesTerminated, NodesTerminationDuration, PodsStartupDuration,
		DisruptionDecisions, DisruptionEligibleNodes, AllocationScheduling, AllocationBinpacking, AllocationBind,
		CloudProviderDuration, CloudProviderErrors, InstanceLaunchFailures, InstanceTerminationFailures, BatchTime, BatchSize,
		EC2NodeClassUserDataBytes, NodePoolAllowedDisruptions, NodePoolNodesConsumingBudgets)
}
