// Package cloudprovider is the seam between Joiner's cloud-agnostic core and a
// cloud: what instance types exist, what they cost where, and how to create
// and delete the machines behind NodeClaims.
package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
)

// CloudProvider creates and deletes the machines behind NodeClaims.
type CloudProvider interface {
	// Create launches a machine for the NodeClaim, choosing the cheapest
	// available offering among its instance-type options, and returns the
	// NodeClaim with labels, capacity and provider ID filled in.
	Create(ctx context.Context, nodeClaim *v1.NodeClaim) (*v1.NodeClaim, error)
	// Delete terminates the machine; it returns a NodeClaimNotFoundError once
	// the machine is gone, so callers can tell "done" from "in progress".
	Delete(ctx context.Context, nodeClaim *v1.NodeClaim) error
	// Get returns the machine with the given provider ID.
	Get(ctx context.Context, providerID string) (*v1.NodeClaim, error)
	// List returns every machine this cluster owns, to find leaks.
	List(ctx context.Context) ([]*v1.NodeClaim, error)
	// InstanceTypes returns every instance type the NodePool could use,
	// including offerings that are currently unavailable.
	InstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*InstanceType, error)
	// IsDrifted returns a non-empty reason when the machine no longer matches
	// its NodeClass.
	IsDrifted(ctx context.Context, nodeClaim *v1.NodeClaim) (string, error)
	// Name of the provider, for logs and metrics.
	Name() string
}

// TypeOverlay gives a NodePool's view of instance types under its
// NodeOverlays: what the providers launch from, so that a launch picks the
// offering the plan priced. Providers take one as an option; nil is none.
type TypeOverlay func(nodePool string, types []*InstanceType) []*InstanceType

// LaunchSlack widens the window in which an instance counts as started by
// a NodeClaim's unrecorded launch attempt (v1.AnnotationLaunchAttempted):
// the cloud stamps the instance's launch time, the controller the attempt,
// and their clocks differ.
const LaunchSlack = time.Minute

// InstanceType is a machine shape and where it can be bought.
type InstanceType struct {
	Name string
	// Labels are the well-known labels a node of this type carries, such as
	// node.kubernetes.io/instance-type, kubernetes.io/arch and the
	// karpenter.k8s.aws/instance-* labels. Zone and capacity type vary per
	// offering and are not here.
	Labels map[string]string
	// Capacity is the machine's raw capacity; Allocatable is what pods can
	// request after kubelet and system reservations.
	Capacity    corev1.ResourceList
	Allocatable corev1.ResourceList
	Offerings   []Offering
	// AttachLimits is how many volumes a new node of this type can attach,
	// per CSI driver (for AWS, ebs.csi.aws.com from the instance type's EBS
	// limit). A driver not listed has no limit. Once a node runs, the
	// limits its CSINode reports take over.
	AttachLimits map[string]int
	// KubeReserved is what the node's kubelet keeps for itself. A cloud
	// whose launch states it (AWS, in the user data) fills it, so the node
	// reserves exactly what planning assumed; nil otherwise.
	KubeReserved corev1.ResourceList
	// PriceOverlaid and CapacityOverlaid say a NodeOverlay changed some
	// offering's price, or the type's capacity: a NodeClaim that may launch
	// such a type is annotated so, as Karpenter annotates it.
	PriceOverlaid, CapacityOverlaid bool

	labelReqs     requirements.Requirements
	labelReqsOnce sync.Once
}

// Copy returns a shallow copy of the type, for a provider that narrows its
// offerings or adds labels: the copy works out its own LabelRequirements.
// (A plain struct copy would carry the original's cache.)
func (it *InstanceType) Copy() *InstanceType {
	return &InstanceType{Name: it.Name, Labels: it.Labels, Capacity: it.Capacity, Allocatable: it.Allocatable,
		Offerings: it.Offerings, AttachLimits: it.AttachLimits, KubeReserved: it.KubeReserved,
		PriceOverlaid: it.PriceOverlaid, CapacityOverlaid: it.CapacityOverlaid}
}

// WithOfferings is a copy of the type that differs in its offerings
// alone, and shares the original's LabelRequirements: the planner copies
// every type to hide or add a commitment's offerings at each plan, and
// working the requirements out again for each copy was a tenth of a
// plan's time. The copy's labels must not change.
func (it *InstanceType) WithOfferings(offerings []Offering) *InstanceType {
	cp := it.Copy()
	cp.Offerings = offerings
	reqs := it.LabelRequirements()
	cp.labelReqsOnce.Do(func() { cp.labelReqs = reqs })
	return cp
}

// LabelRequirements are Labels as single-value requirements, worked out
// once per type: every plan asks for them of every type of every pool, and
// consolidation makes dozens of plans a decision. The caller must not
// change them; Copy them to add more.
func (it *InstanceType) LabelRequirements() requirements.Requirements {
	it.labelReqsOnce.Do(func() { it.labelReqs = typeLabels.LabelRequirements(it.Labels) })
	return it.labelReqs
}

// typeLabels shares the requirements of a label among the instance types
// that carry it, and among a provider's refreshes of its types: there are a
// few thousand distinct labels, however often types are rebuilt.
var typeLabels requirements.Interner

// Offering is one way to buy an instance type: a zone and a capacity type at a price.
type Offering struct {
	Zone         string
	CapacityType string
	// Price in $/h.
	Price     float64
	Available bool
	// Room, when its ID is set, makes this a commitment's offering: its
	// price holds only while the commitment has room (an RI's unused
	// instances, a Savings Plan's unused dollars). Beside it the type has
	// its ordinary offering of the same zone and capacity type at list.
	Room Room
}

// Room is what a commitment has left, shared by every offering that names
// its ID, in the commitment's own units (instances or normalization units
// of an RI, dollars per hour of a Savings Plan), and what one node of the
// offering's type takes of it.
type Room struct {
	ID    string
	Left  float64
	Takes float64
}

// Limited reports whether the offering is a commitment's.
func (o Offering) Limited() bool { return o.Room.ID != "" }

// Admits reports whether the requirements that depend on the instance type
// alone allow it. Zone and capacity type vary per offering and are checked
// there. A key the type has no label for is not the cloud's to judge: such
// labels come from the NodePool template and the NodeClaim carries them
// onto the Node itself.
func (it *InstanceType) Admits(reqs requirements.Requirements) bool {
	for key := range reqs {
		switch key {
		case corev1.LabelTopologyZone, v1.LabelCapacityType:
			continue
		case corev1.LabelInstanceTypeStable:
			if !reqs.Allows(key, it.Name) {
				return false
			}
			continue
		}
		if v, ok := it.Labels[key]; ok && !reqs.Allows(key, v) {
			return false
		}
	}
	return true
}

// CheapestOffering returns the cheapest available offering that the filter
// accepts, or false when there is none.
func (it *InstanceType) CheapestOffering(accept func(Offering) bool) (Offering, bool) {
	var best Offering
	found := false
	for _, o := range it.Offerings {
		if !o.Available || (accept != nil && !accept(o)) {
			continue
		}
		if !found || o.Price < best.Price || (o.Price == best.Price && o.Zone+o.CapacityType < best.Zone+best.CapacityType) {
			best, found = o, true
		}
	}
	return best, found
}

// ListPrice is the price of the type's offering in the zone and capacity
// type, available or not, leaving out a commitment's room (Offering.Room,
// which prices another node the planner may launch, not one that runs);
// false when the type has no such offering.
func (it *InstanceType) ListPrice(zone, capacityType string) (float64, bool) {
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType && !o.Limited() {
			return o.Price, true
		}
	}
	return 0, false
}

// InsufficientCapacityError means no offering of the NodeClaim's options had
// capacity; the NodeClaim is deleted and its pods are scheduled again.
type InsufficientCapacityError struct{ Err error }

func (e *InsufficientCapacityError) Error() string { return "insufficient capacity, " + e.Err.Error() }
func (e *InsufficientCapacityError) Unwrap() error { return e.Err }

// NodeClassNotReadyError means the NodeClass cannot launch yet.
type NodeClassNotReadyError struct{ Err error }

func (e *NodeClassNotReadyError) Error() string { return "NodeClass not ready, " + e.Err.Error() }
func (e *NodeClassNotReadyError) Unwrap() error { return e.Err }

// NodeClaimNotFoundError means the machine does not exist (any more).
type NodeClaimNotFoundError struct{ ProviderID string }

func (e *NodeClaimNotFoundError) Error() string {
	return fmt.Sprintf("nodeclaim not found, provider ID %q", e.ProviderID)
}

// IsInsufficientCapacity reports whether err is an InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool {
	var e *InsufficientCapacityError
	return errors.As(err, &e)
}

// IsNodeClaimNotFound reports whether err is a NodeClaimNotFoundError.
func IsNodeClaimNotFound(err error) bool {
	var e *NodeClaimNotFoundError
	return errors.As(err, &e)
}

// IsNodeClassNotReady reports whether err is a NodeClassNotReadyError.
func IsNodeClassNotReady(err error) bool {
	var e *NodeClassNotReadyError
	return errors.As(err, &e)
}
