package disruption

import (
	"context"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

// listPrice is the list price of the type's offering in the zone and
// capacity type; +Inf when the pool no longer offers it. A commitment's
// offering (Offering.Room) prices another node the planner may launch,
// not a node that runs: what the bill saves when a running node goes is
// marginalPrices'.
func listPrice(it *cloudprovider.InstanceType, zone, capacityType string) float64 {
	if it == nil {
		return math.Inf(1)
	}
	if price, ok := it.ListPrice(zone, capacityType); ok {
		return price
	}
	return math.Inf(1)
}

// saving is what the bill saves per hour when NodeClaims go together,
// under the account's commitments, when the cloud provider knows them
// (cloudprovider.Bill); nil when list prices hold, or the bill cannot be
// read. The NodeClaims already leaving (marked) count as gone: a node
// the RIs cover saves nothing, even while the nodes that went before it
// are still draining, so it is never consolidated for price (to spot,
// say), nor removed empty while it costs nothing.
func (c *Controller) saving(ctx context.Context, claims []*v1.NodeClaim, nodes map[string]*corev1.Node, marked func(*v1.NodeClaim, *corev1.Node) bool) func([]string) float64 {
	b, ok := c.CloudProvider.(cloudprovider.Biller)
	if !ok {
		return nil
	}
	bill, err := b.Bill(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "pricing nodes under the commitments; consolidating at list prices")
		return nil
	}
	if bill.Saving == nil {
		return nil
	}
	var leaving []string
	for _, nc := range claims {
		var node *corev1.Node
		if nc.Status.NodeName != "" {
			node = nodes[nc.Status.NodeName]
		}
		if marked(nc, node) {
			leaving = append(leaving, nc.Name)
		}
	}
	gone := bill.Saving(leaving)
	return func(names []string) float64 {
		return bill.Saving(append(slices.Clone(leaving), names...)) - gone
	}
}
