package commitment

import "sort"

// Room is what one commitment has left for more instances of a type in a
// zone: Left in the commitment's units (RI instances, normalization units
// of a regional RI, a plan's dollars per hour), Takes per instance, each
// at Price ($/h: nothing under an RI, the rate under a plan).
type Room struct {
	ID    string
	Left  float64
	Takes float64
	Price float64
}

// Rooms are the commitments with room left (after left, what Apply left
// of them) for at least one more on-demand instance of the type in the
// zone, listed at list: RIs first, then plans whose rate is under list,
// cheapest first. The planner hands each room out a whole instance at a
// time; what is left of an instance's share is not planned on.
func Rooms(c Commitments, left Coverage, instanceType, zone string, list float64) []Room {
	var out []Room
	for _, ri := range c.ReservedInstances {
		if takes := Takes(ri, instanceType, zone); takes > 0 && left.Left[ri.ID] >= takes-1e-9 {
			out = append(out, Room{ID: ri.ID, Left: left.Left[ri.ID], Takes: takes})
		}
	}
	var plans []Room
	for _, p := range c.SavingsPlans {
		if rate, ok := p.Rates[instanceType]; ok && rate > 0 && rate < list && left.Left[p.ID] >= rate-1e-9 {
			plans = append(plans, Room{ID: p.ID, Left: left.Left[p.ID], Takes: rate, Price: rate})
		}
	}
	sort.SliceStable(plans, func(i, j int) bool { return plans[i].Price < plans[j].Price })
	return append(out, plans...)
}

// Takes is how much of the RI one instance of the type in the zone takes,
// in the RI's units, or 0 when the RI does not cover it: a zonal RI an
// instance of its type and zone, a regional RI normalization units within
// its family (an instance of its own type when the size has no factor).
func Takes(ri ReservedInstance, instanceType, zone string) float64 {
	switch {
	case ri.Zone != "":
		return boolFloat(ri.Type == instanceType && ri.Zone == zone)
	case Normalization(ri.Type) == 0:
		return boolFloat(ri.Type == instanceType)
	case sameFamily(ri.Type, instanceType):
		return Normalization(instanceType)
	}
	return 0
}
