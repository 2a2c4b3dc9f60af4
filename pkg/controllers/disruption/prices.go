package disruption

import (
	"context"
	"math"

	"sigs.k8s.io/controller-runtime/pkg/log"

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
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType && !o.Limited() {
			return o.Price
		}
	}
	return math.Inf(1)
}

// marginalPrices are what the bill saves when each candidate goes, under
// the account's commitments, when the cloud provider knows them; a node
// the RIs cover saves nothing, so it is never consolidated for price (to
// spot, say). A failed reading leaves list prices.
func (c *Controller) marginalPrices(ctx context.Context) map[string]float64 {
	b, ok := c.CloudProvider.(cloudprovider.Biller)
	if !ok {
		return nil
	}
	prices, err := b.MarginalPrices(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "pricing nodes under the commitments; consolidating at list prices")
		return nil
	}
	return prices
}
