package commitment

import (
	"slices"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

// OnDemand is the capacity type commitments give room on.
const OnDemand = "on-demand"

// WithRooms adds to each type's on-demand offerings one per commitment
// with room for another instance of it in that zone (Rooms, after left),
// priced as the bill would: a plan's rate, or riPrice times list under an
// RI (a token above nothing, so that a paid-for capacity reservation
// fills first). The planner hands the rooms out (scheduling's room.go).
// Types with no room are returned as they are; the others are copies.
func WithRooms(c Commitments, left Coverage, its []*cloudprovider.InstanceType, riPrice float64) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, len(its))
	for i, it := range its {
		var extra []cloudprovider.Offering
		for _, o := range it.Offerings {
			if o.CapacityType != OnDemand || !o.Available || o.Limited() {
				continue
			}
			for _, r := range Rooms(c, left, it.Name, o.Zone, o.Price) {
				price := r.Price
				if price == 0 {
					price = riPrice * o.Price
				}
				extra = append(extra, cloudprovider.Offering{Zone: o.Zone, CapacityType: o.CapacityType, Price: price, Available: true,
					Room: cloudprovider.Room{ID: r.ID, Left: r.Left, Takes: r.Takes}})
			}
		}
		out[i] = it
		if len(extra) > 0 {
			out[i] = it.WithOfferings(append(slices.Clone(it.Offerings), extra...))
		}
	}
	return out
}
