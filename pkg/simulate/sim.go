// Package simulate replays a workload over simulated time through Joiner's
// own decision code: provisioning plans are scheduling.Solve's, voluntary
// disruption is disruption.Decide's, budgets are disruption.Remaining's and
// protections are disruption.Protected's. What the package adds is only
// what a cluster would do around those decisions: a clock, pods that
// arrive and leave, nodes that take time to launch, kube-scheduler binding
// pods, evictions, spot interruptions and capacity shortages.
//
// A run is deterministic: the same configuration, trace and seed give the
// same result, so two configurations differ only where their decisions do.
package simulate

import (
	"container/heap"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// Config is one configuration of the cluster to simulate.
type Config struct {
	// Name labels the configuration in results and reports.
	Name string
	// Objects are the NodePools, EC2NodeClasses, DaemonSets, workloads
	// (Deployments, StatefulSets, ReplicaSets and Jobs, at their initial
	// replicas; bare Pods), storage (claims, volumes, classes), Nodes to
	// start from, and PodDisruptionBudgets.
	Objects       *manifests.Objects
	InstanceTypes []*cloudprovider.InstanceType
	// Scheduling are the operator's planning settings.
	Scheduling scheduling.Options
	// SpotToSpot is the SpotToSpotConsolidation feature gate.
	SpotToSpot bool
	// StaticCapacity is the StaticCapacity feature gate: static NodePools
	// (spec.replicas) keep their nodes (static.go); without it they are
	// refused.
	StaticCapacity bool
	// Commitments are the account's Reserved Instances and Savings Plans
	// (bill.go); nil prices everything at list.
	Commitments *commitment.Commitments
	Timing      Timing
}

// Timing is how long the cluster takes to do things, and how often Joiner
// looks. The defaults are the controller's (batching, poll, validation)
// and, for EC2, what the AWS provider's launches take on EKS.
type Timing struct {
	// BatchIdle and BatchMax are BATCH_IDLE_DURATION and BATCH_MAX_DURATION.
	BatchIdle, BatchMax time.Duration
	// DisruptionPoll is DISRUPTION_POLL; ValidationDelay is how long a
	// deletion waits before it drains (the controller's 15s).
	DisruptionPoll, ValidationDelay time.Duration
	// Launch is from a NodeClaim's creation to its Node registering;
	// Initialize from registration to initialized (pods may bind).
	Launch, Initialize time.Duration
	// Drain is from a node's pods being evicted to the instance being
	// terminated, when its cost stops.
	Drain time.Duration
	// Sample is the interval of the time series.
	Sample time.Duration
	// SpotInterruptionsPerHour is the chance per hour that AWS interrupts
	// a given spot instance.
	SpotInterruptionsPerHour float64
	// Seed makes interruptions and generated traces repeatable.
	Seed int64
}

// DefaultTiming is the controller's defaults with EC2's usual launch.
func DefaultTiming() Timing {
	return Timing{BatchIdle: time.Second, BatchMax: 10 * time.Second, DisruptionPoll: 10 * time.Second,
		ValidationDelay: 15 * time.Second, Launch: 35 * time.Second, Initialize: 15 * time.Second,
		Drain: 30 * time.Second, Sample: time.Minute, Seed: 1}
}

// event is something that happens at a simulated instant. Events at the
// same instant run in the order they were scheduled (seq), which keeps a
// run deterministic.
type event struct {
	at  time.Time
	seq int
	fn  func()
}

type queue []event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// at schedules fn at t (never before now).
func (s *sim) at(t time.Time, fn func()) {
	if t.Before(s.now) {
		t = s.now
	}
	s.seq++
	heap.Push(&s.q, event{at: t, seq: s.seq, fn: fn})
}

// after schedules fn d from now.
func (s *sim) after(d time.Duration, fn func()) { s.at(s.now.Add(d), fn) }
