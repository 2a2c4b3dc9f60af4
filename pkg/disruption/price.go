package disruption

import (
	"fmt"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// cheaperOnly narrows replacements for nodes costing price ($/h in all) to
// the launch options that save money whatever the cloud launches. A
// NodeClaim lists every type within the price band, and the cloud may
// launch any of them: when the cheapest is out of capacity it takes the
// next, which can cost as much as the node it replaces, so that every pod
// is moved for nothing, and again a few minutes later. Each option is
// judged by its worst price among the offerings the NodeClaim allows, as
// Karpenter does. With several replacements the savings are shared out
// evenly, so that even all of them at their worst cost less than price.
// It returns why not when a replacement keeps no option, or too few for a
// minValues requirement.
func cheaperOnly(repls []*scheduling.NewNodeClaim, price float64) ([]*scheduling.NewNodeClaim, string) {
	if len(repls) == 0 {
		return repls, ""
	}
	share := (price - scheduling.TotalPrice(repls)) / float64(len(repls))
	out := make([]*scheduling.NewNodeClaim, len(repls))
	for i, r := range repls {
		bound := r.Price() + share
		allowed := offeringFilter(r.Requirements)
		var kept []*cloudprovider.InstanceType
		var names []string
		for _, it := range r.InstanceTypes {
			worst, ok := worstPrice(it, allowed)
			if r.Offering.Limited() && it == r.InstanceType {
				// Pinned to a commitment's room: the bill charges the
				// room's price whatever the launch.
				worst, ok = r.Offering.Price, true
			}
			if ok && worst < bound-1e-9 {
				kept = append(kept, it)
				names = append(names, it.Name)
			}
		}
		if len(kept) == 0 {
			return nil, fmt.Sprintf("no cheaper replacement: every launch option of %s can cost $%.4f/h or more, what the node costs", r.InstanceType.Name, bound)
		}
		if why := minValuesShort(r.Requirements, kept); why != "" {
			return nil, why
		}
		cp := *r
		cp.InstanceTypes = kept
		cp.InstanceType = kept[0]
		// At list: a commitment's room is the planner's to hand out, and
		// this replacement was not handed one.
		listed := func(o cloudprovider.Offering) bool { return !o.Limited() && allowed(o) }
		cp.Offering, _ = kept[0].CheapestOffering(listed)
		for _, it := range kept[1:] {
			if o, ok := it.CheapestOffering(listed); ok && o.Price < cp.Offering.Price {
				cp.InstanceType, cp.Offering = it, o
			}
		}
		if r.Offering.Limited() {
			// The planner handed this room to this replacement; another
			// room of the type may be another's.
			cp.InstanceType, cp.Offering = r.InstanceType, r.Offering
		}
		cp.Requirements = r.Requirements.Copy()
		was := r.Requirements[corev1.LabelInstanceTypeStable]
		cp.Requirements[corev1.LabelInstanceTypeStable] = requirements.MustRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...)
		if was != nil && was.MinValues != nil {
			cp.Requirements[corev1.LabelInstanceTypeStable].MinValues = was.MinValues
		}
		out[i] = &cp
	}
	return out, ""
}

// offeringFilter accepts the offerings a NodeClaim with reqs may launch as.
func offeringFilter(reqs requirements.Requirements) func(cloudprovider.Offering) bool {
	zones, cts := reqs[corev1.LabelTopologyZone], reqs[v1.LabelCapacityType]
	return func(o cloudprovider.Offering) bool {
		return (zones == nil || zones.Has(o.Zone)) && (cts == nil || cts.Has(o.CapacityType))
	}
}

// worstPrice is the dearest available offering of it that accept allows.
func worstPrice(it *cloudprovider.InstanceType, accept func(cloudprovider.Offering) bool) (float64, bool) {
	worst, found := 0.0, false
	for _, o := range it.Offerings {
		if o.Available && accept(o) && (!found || o.Price > worst) {
			worst, found = o.Price, true
		}
	}
	return worst, found
}

// minValuesShort says which minValues requirement of reqs the types no
// longer meet; empty when all are met.
func minValuesShort(reqs requirements.Requirements, types []*cloudprovider.InstanceType) string {
	for k, r := range reqs {
		if r.MinValues == nil {
			continue
		}
		seen := map[string]bool{}
		for _, it := range types {
			if v, ok := it.Labels[k]; ok {
				seen[v] = true
			} else if k == corev1.LabelInstanceTypeStable {
				seen[it.Name] = true
			}
		}
		if len(seen) < *r.MinValues {
			return fmt.Sprintf("no cheaper replacement: %d instance types are cheaper than the node, with %d values of %s, and minValues needs %d", len(types), len(seen), k, *r.MinValues)
		}
	}
	return ""
}
