// Package commitment prices instances as the AWS bill does under Reserved
// Instances and Savings Plans. It is pure: commitments and instances in,
// each instance's effective price and what is left of each commitment
// out, with no API calls and no clock, so that provisioning,
// consolidation, plan, the viewer and the metrics all price the same way.
//
// The order is AWS's documented one: zonal RIs cover matching instances
// first, then regional RIs (size-flexible within a family, smallest sizes
// first, by normalization factor), then Savings Plans, EC2 Instance plans
// before Compute plans, each covering the usage with the deepest discount
// first. Spot usage is never covered.
//
// An instance's effective price is what one more hour of it adds to the
// bill as Joiner counts it: nothing for the part an RI covers (its fee is
// paid whether or not an instance uses it, and it fits one family alone);
// the plan's rate for the part a Savings Plan covers (a dollar of
// commitment one instance uses is a dollar any other could have used);
// the list price for the rest.
package commitment

import (
	"sort"
	"strings"
)

// CapacityTypeSpot is the one capacity type commitments never cover;
// on-demand and reserved (capacity reservation) usage are billed alike.
const CapacityTypeSpot = "spot"

// Instance is one instance as the bill sees it.
type Instance struct {
	ID           string
	Type         string
	Zone         string
	CapacityType string
	// ListPrice is its on-demand (or spot) price, $/h.
	ListPrice float64
}

// ReservedInstance is an active Reserved Instance purchase of Count
// instances of Type, in Zone (zonal) or the region ("").
type ReservedInstance struct {
	ID    string
	Type  string
	Zone  string
	Count int
}

// Units is the RI's room in its own units: instances, or normalization
// units for a size-flexible regional RI.
func (ri ReservedInstance) Units() float64 {
	if ri.Zone == "" {
		return float64(ri.Count) * max(Normalization(ri.Type), 1)
	}
	return float64(ri.Count)
}

// SavingsPlan is an active Savings Plan: Commitment dollars per hour, at
// Rates per instance type ($/h). An EC2 Instance plan's rates cover its
// family alone.
type SavingsPlan struct {
	ID          string
	EC2Instance bool
	Commitment  float64
	Rates       map[string]float64
}

// Commitments are a region's active RIs and Savings Plans.
type Commitments struct {
	ReservedInstances []ReservedInstance
	SavingsPlans      []SavingsPlan
}

// Coverage is the result of applying commitments to instances.
type Coverage struct {
	// Effective is each instance's effective price, $/h, by ID.
	Effective map[string]float64
	// Left is what remains of each commitment: RI units (in
	// normalization units for regional RIs, instances for zonal ones) by
	// RI ID, Savings Plan dollars per hour by plan ID.
	Left map[string]float64
}

// Total is the sum of the instances' effective prices.
func (c Coverage) Total() float64 {
	t := 0.0
	for _, ids := range sortedIDs(c.Effective) {
		t += c.Effective[ids]
	}
	return t
}

func sortedIDs(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Apply covers the instances with the commitments in AWS's order.
func Apply(c Commitments, instances []Instance) Coverage {
	out := Coverage{Effective: map[string]float64{}, Left: map[string]float64{}}
	// uncovered is each on-demand instance's share not yet covered, 0 to 1.
	uncovered := map[string]float64{}
	var od []Instance
	for _, in := range instances {
		out.Effective[in.ID] = in.ListPrice
		if in.CapacityType != CapacityTypeSpot {
			uncovered[in.ID] = 1
			od = append(od, in)
		}
	}
	// Smallest first within a family, then by name, zone and ID: the
	// order regional RIs are applied in, and a deterministic one.
	sort.Slice(od, func(i, j int) bool {
		a, b := od[i], od[j]
		if na, nb := Normalization(a.Type), Normalization(b.Type); na != nb {
			return na < nb
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		return a.ID < b.ID
	})
	ris := append([]ReservedInstance(nil), c.ReservedInstances...)
	sort.SliceStable(ris, func(i, j int) bool { return ris[i].Zone != "" && ris[j].Zone == "" })
	for _, ri := range ris {
		left := ri.Units()
		for _, in := range od {
			units := Takes(ri, in.Type, in.Zone)
			if left <= 0 || units == 0 || uncovered[in.ID] == 0 {
				continue
			}
			take := min(left/units, uncovered[in.ID])
			uncovered[in.ID] -= take
			left -= take * units
		}
		out.Left[ri.ID] = left
	}
	for _, in := range od {
		out.Effective[in.ID] = in.ListPrice * uncovered[in.ID]
	}
	applySavingsPlans(c.SavingsPlans, od, uncovered, out)
	return out
}

// applySavingsPlans covers what RIs left: EC2 Instance plans first, then
// Compute plans; within each, the usage with the deepest discount first.
func applySavingsPlans(plans []SavingsPlan, od []Instance, uncovered map[string]float64, out Coverage) {
	ordered := append([]SavingsPlan(nil), plans...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].EC2Instance && !ordered[j].EC2Instance })
	for _, p := range ordered {
		left := p.Commitment
		cands := make([]Instance, 0, len(od))
		for _, in := range od {
			if rate, ok := p.Rates[in.Type]; ok && uncovered[in.ID] > 0 && in.ListPrice > 0 && rate < in.ListPrice {
				cands = append(cands, in)
			}
		}
		sort.SliceStable(cands, func(i, j int) bool {
			return 1-p.Rates[cands[i].Type]/cands[i].ListPrice > 1-p.Rates[cands[j].Type]/cands[j].ListPrice
		})
		for _, in := range cands {
			rate := p.Rates[in.Type]
			if left <= 0 {
				break
			}
			take := min(left/rate, uncovered[in.ID])
			uncovered[in.ID] -= take
			left -= take * rate
			out.Effective[in.ID] = out.Effective[in.ID] - take*in.ListPrice + take*rate
		}
		out.Left[p.ID] = left
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sameFamily(a, b string) bool {
	fa, _, _ := strings.Cut(a, ".")
	fb, _, _ := strings.Cut(b, ".")
	return fa == fb
}

// Savings gives what the bill saves per hour when the removed instances go
// together and the others stay: a spot instance its list price; an
// on-demand one what the commitments did not cover of it, or what it
// frees of them for the others. Which instances an RI "covers" is the
// bill's bookkeeping, not theirs: with 10 on-demand instances under 8 RIs,
// each saves its list price alone, but three together save only two list
// prices, since the RIs then cover every instance that stays.
// The bill with every instance is worked out once: consolidation asks
// this of each candidate in turn.
func Savings(c Commitments, instances []Instance) func(removed map[string]bool) float64 {
	all := Apply(c, instances).Total()
	return func(removed map[string]bool) float64 {
		rest := make([]Instance, 0, len(instances))
		for _, in := range instances {
			if !removed[in.ID] {
				rest = append(rest, in)
			}
		}
		return all - Apply(c, rest).Total()
	}
}
