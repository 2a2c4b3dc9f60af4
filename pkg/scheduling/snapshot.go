// Package scheduling is Joiner's one scheduling core. Given a snapshot of
// pending pods, existing nodes, NodePools with their instance types and
// DaemonSets, it returns a plan: which pods fit on existing capacity and which
// new NodeClaims to create for the rest, at the lowest total price it can find.
//
// It is pure and deterministic: no API calls, no clock, no randomness, so the
// provisioner, consolidation and the offline planner all get the same answer
// for the same snapshot.
//
// Its entry points are Solve and SolveWithOne (solve.go), NewCluster for
// consolidation's trials (cluster.go), and LowerBound and PackingModel
// (bound.go) for grading plans. The requirement and resource algebra it
// uses is pkg/requirements and pkg/resources; the LPs it rounds are
// pkg/lpbound's.
package scheduling

import (
	"errors"
	"fmt"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
)

// Snapshot is everything a plan depends on.
type Snapshot struct {
	// Pods are the pods to place.
	Pods []*corev1.Pod
	// Nodes are existing nodes and in-flight NodeClaims that pods may use.
	Nodes []*Node
	// NodePools and the instance types each may launch.
	NodePools []NodePool
	// Static are the static NodePools (spec.replicas, StaticCapacity):
	// they launch nothing for pods, so plans leave them out; disruption
	// reads their types to price and replace their drifted nodes.
	Static []NodePool
	// DaemonSets add their pods' requests to every new node they would run on.
	DaemonSets []*corev1.Pod
	// Volumes are what pods' volumes need, by namespace/name: the volumes
	// each attaches, or why they cannot be resolved. Where the volumes let
	// a pod run is in its required node affinity (see volumes.Index.Apply).
	Volumes map[string]volumes.Usage
	// Namespaces map the cluster's namespaces to their labels, which the
	// namespaceSelector of pod affinity terms matches. A namespace left out
	// has only its kubernetes.io/metadata.name label.
	Namespaces map[string]map[string]string
	// Nominated maps pods (namespace/name) to the node, as Nodes name it,
	// that an earlier plan put them on: most often an in-flight NodeClaim
	// launched for them. The plan keeps them there where they still fit.
	Nominated map[string]string
	// Shared, when set, is Share of these NodePools and DaemonSets, made
	// once for many plans of the same cluster; nil builds it for this plan.
	Shared *Shared
}

// NodePool is a NodePool with the instance types its NodeClass allows.
type NodePool struct {
	NodePool      *v1.NodePool
	InstanceTypes []*cloudprovider.InstanceType
	// InUse is the capacity of the pool's existing nodes, counted against
	// its limits; the "nodes" resource counts nodes.
	InUse corev1.ResourceList
	// room, for a commitment pool (roompools.go), is its commitment.
	room *roomPool
}

// Node is capacity that already exists or is being launched.
type Node struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	// Allocatable of the node (for an in-flight NodeClaim, its expected allocatable).
	Allocatable corev1.ResourceList
	// Pods bound to the node; they use capacity and count for topology.
	Pods []*corev1.Pod
	// NodePool that owns the node, if any; used for limits accounting.
	NodePool string
	// InFlight marks a NodeClaim that has no Ready node yet, so its
	// startup and not-ready taints are expected to go away.
	InFlight bool
	// MarkedForDeletion nodes take no new pods.
	MarkedForDeletion bool
	// AttachLimits is how many volumes the node can attach per CSI driver
	// (its CSINode's allocatable counts); drivers not listed have no limit.
	AttachLimits map[string]int
}

// Plan is the outcome of scheduling a snapshot.
type Plan struct {
	NewNodeClaims []*NewNodeClaim
	// Existing maps pods (namespace/name) to the existing node they fit on.
	Existing map[string]string
	// Unschedulable pods with the reason, per NodePool where relevant.
	Unschedulable []PodError
}

// NewNodeClaim is a node to launch.
type NewNodeClaim struct {
	NodePool string
	// Requirements the NodeClaim carries: the NodePool's requirements
	// narrowed by its pods, plus the instance-type and capacity-type options.
	Requirements requirements.Requirements
	// InstanceTypes are the launch options, cheapest first; all fit the pods
	// and stay close in price to the first.
	InstanceTypes []*cloudprovider.InstanceType
	// Offering is the cheapest offering of the cheapest option: what the
	// plan expects to pay.
	Offering     cloudprovider.Offering
	InstanceType *cloudprovider.InstanceType
	// Requests are the pods' requests plus the DaemonSet overhead of
	// InstanceType. Which DaemonSets run depends on the type's labels, so
	// another option's overhead may differ; each option has room for its
	// own.
	Requests resources.Resources
	Pods     []*corev1.Pod
	// MinValuesRelaxed says the options meet some requirement's minValues
	// only as lowered in Requirements (MIN_VALUES_POLICY=BestEffort).
	MinValuesRelaxed bool
}

// PodError says why a pod cannot be placed.
type PodError struct {
	Pod    *corev1.Pod
	Reason string
	// Pools, when no NodePool could run the pod, is why each could not,
	// in the order they were tried (the Reason says the same).
	Pools []PoolReason
}

// PoolReason is why one NodePool could not run a pod.
type PoolReason struct {
	NodePool string `json:"nodePool"`
	Reason   string `json:"reason"`
}

// noPoolError is the error of a pod no NodePool can run, with each
// pool's reason.
type noPoolError struct{ pools []PoolReason }

func (e *noPoolError) Error() string {
	parts := make([]string, len(e.pools))
	for i, r := range e.pools {
		parts[i] = fmt.Sprintf("nodepool %q: %s", r.NodePool, r.Reason)
	}
	return "no NodePool can run the pod: " + strings.Join(parts, "; ")
}

// podError is the PodError for err, with each pool's reason when err
// says no NodePool can run the pod.
func podError(pod *corev1.Pod, err error) PodError {
	pe := PodError{Pod: pod, Reason: err.Error()}
	var np *noPoolError
	if errors.As(err, &np) {
		pe.Pools = np.pools
	}
	return pe
}

// Price is the expected price of the NodeClaim, $/h.
func (n *NewNodeClaim) Price() float64 { return n.Offering.Price }

// TotalPrice sums the price of the new NodeClaims, $/h.
func (p *Plan) TotalPrice() float64 { return TotalPrice(p.NewNodeClaims) }

// TotalPrice sums the price of NodeClaims, $/h.
func TotalPrice(ncs []*NewNodeClaim) float64 {
	total := 0.0
	for _, n := range ncs {
		total += n.Price()
	}
	return total
}
