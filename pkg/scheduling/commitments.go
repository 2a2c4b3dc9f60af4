package scheduling

import (
	"fmt"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	corev1 "k8s.io/api/core/v1"
)

// WithCommitments gives an offline snapshot's pools the commitments'
// rooms, after its existing nodes have taken theirs, as the AWS provider
// gives them to the controller's plans: the plan then fills paid-for
// commitments first. An RI's room is priced a token above nothing.
// `joiner plan --commitments` and hack/optimum plan with it.
func WithCommitments(cm commitment.Commitments, snap Snapshot) Snapshot {
	left := commitment.Apply(cm, existingFleet(snap))
	pools := make([]NodePool, len(snap.NodePools))
	for i, p := range snap.NodePools {
		p.InstanceTypes = commitment.WithRooms(cm, left, p.InstanceTypes, 1e-6)
		pools[i] = p
	}
	snap.NodePools = pools
	return snap
}

// existingFleet is the snapshot's nodes as the bill sees them, priced at
// their pools' offerings.
func existingFleet(snap Snapshot) []commitment.Instance {
	var fleet []commitment.Instance
	for _, n := range snap.Nodes {
		typ, zone, ct := n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone], n.Labels[v1.LabelCapacityType]
		if typ == "" {
			continue
		}
		price := 0.0
		for _, p := range snap.NodePools {
			for _, it := range p.InstanceTypes {
				if it.Name == typ {
					price = max(price, listPrice(it, zone, ct))
				}
			}
		}
		fleet = append(fleet, commitment.Instance{ID: "node/" + n.Name, Type: typ, Zone: zone, CapacityType: ct, ListPrice: price})
	}
	return fleet
}

// Bill prices a plan's new NodeClaims on the bill: the commitments
// applied, in AWS's order, to the snapshot's nodes and the NodeClaims,
// each at its offering's price without a commitment's room (NodeOverlays
// included).
func Bill(cm commitment.Commitments, snap Snapshot, plan *Plan) map[*NewNodeClaim]float64 {
	fleet := existingFleet(snap)
	for i, nc := range plan.NewNodeClaims {
		fleet = append(fleet, commitment.Instance{ID: fmt.Sprint(i), Type: nc.InstanceType.Name, Zone: nc.Offering.Zone, CapacityType: nc.Offering.CapacityType,
			ListPrice: listPrice(nc.InstanceType, nc.Offering.Zone, nc.Offering.CapacityType)})
	}
	cov := commitment.Apply(cm, fleet)
	out := map[*NewNodeClaim]float64{}
	for i, nc := range plan.NewNodeClaims {
		out[nc] = cov.Effective[fmt.Sprint(i)]
	}
	return out
}

// listPrice is the type's list price in the zone and capacity type; 0
// when it has none.
func listPrice(it *cloudprovider.InstanceType, zone, ct string) float64 {
	p, _ := it.ListPrice(zone, ct)
	return p
}
