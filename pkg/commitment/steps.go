package commitment

import (
	"math"
	"sort"
)

// Step is a run of Count additional instances (possibly a fraction of
// one) at Price each, $/h.
type Step struct {
	Count float64
	Price float64
}

// Steps are the prices of successive additional on-demand instances of a
// type in a zone, given what the running instances left of the
// commitments: free while an RI has room for it, a plan's rate while the
// plan has commitment left (cheapest rate first), then list, without end.
// Each step reads the same leftovers, so steps of two types priced for
// one plan may both count the same commitment: the caller prices again
// after each launch.
func Steps(c Commitments, left Coverage, instanceType, zone string, list float64) []Step {
	var out []Step
	free := 0.0
	for _, ri := range c.ReservedInstances {
		l := left.Left[ri.ID]
		switch {
		case l <= 0:
		case ri.Zone != "":
			if ri.Type == instanceType && ri.Zone == zone {
				free += l
			}
		case Normalization(ri.Type) == 0:
			if ri.Type == instanceType {
				free += l
			}
		case sameFamily(ri.Type, instanceType) && Normalization(instanceType) > 0:
			free += l / Normalization(instanceType)
		}
	}
	if free > 0 {
		out = append(out, Step{Count: free, Price: 0})
	}
	var plans []Step
	for _, p := range c.SavingsPlans {
		rate, ok := p.Rates[instanceType]
		if l := left.Left[p.ID]; ok && l > 0 && rate > 0 && rate < list {
			plans = append(plans, Step{Count: l / rate, Price: rate})
		}
	}
	sort.SliceStable(plans, func(i, j int) bool { return plans[i].Price < plans[j].Price })
	out = append(out, plans...)
	return append(out, Step{Count: math.Inf(1), Price: list})
}

// Nth is the price of the nth additional instance (from 1): the steps'
// prices averaged over the hour-shares that cover it.
func Nth(steps []Step, n int) float64 {
	from, to := float64(n-1), float64(n)
	at, price := 0.0, 0.0
	for _, s := range steps {
		lo, hi := max(at, from), min(at+s.Count, to)
		if hi > lo {
			price += (hi - lo) * s.Price
		}
		at += s.Count
		if at >= to {
			break
		}
	}
	return price
}
