package disruption

import (
	"fmt"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// SpotToSpotMinTypes is how many instance types cheaper than a spot node a
// spot replacement must be able to launch as, and launches with. Spot
// prices move and capacity comes and goes by type; a replacement limited to
// the one cheapest type would be interrupted soon, or replaced again as soon
// as prices shift. Karpenter uses the same number.
const SpotToSpotMinTypes = 15

// spotToSpot narrows the spot replacement of spot nodes costing price to
// the SpotToSpotMinTypes cheapest instance types of the pool (types) that
// hold its pods and cost less than price, or says why it cannot.
func spotToSpot(price float64, repl *scheduling.NewNodeClaim, types []*cloudprovider.InstanceType) (*scheduling.NewNodeClaim, string) {
	zones := repl.Requirements[corev1.LabelTopologyZone]
	accept := func(o cloudprovider.Offering) bool {
		return o.CapacityType == v1.CapacityTypeSpot && (zones == nil || zones.Has(o.Zone))
	}
	// Only requirements on instance labels narrow the types; the NodePool's
	// own labels are on every node it launches.
	typeKeys := map[string]bool{}
	for _, it := range types {
		for k := range it.Labels {
			typeKeys[k] = true
		}
	}
	type option struct {
		it  *cloudprovider.InstanceType
		off cloudprovider.Offering
	}
	var cheaper []option
	for _, it := range types {
		if !repl.Requests.Fits(resources.FromResourceList(it.Allocatable)) {
			continue
		}
		labels := it.LabelRequirements()
		ok := true
		for k, r := range repl.Requirements {
			if k == corev1.LabelInstanceTypeStable || k == corev1.LabelTopologyZone || k == v1.LabelCapacityType || !typeKeys[k] {
				continue
			}
			if labels.Compatible(requirements.Requirements{k: r}) != nil {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if off, found := it.CheapestOffering(accept); found && off.Price < price {
			cheaper = append(cheaper, option{it, off})
		}
	}
	if len(cheaper) < SpotToSpotMinTypes {
		return nil, fmt.Sprintf("spot-to-spot consolidation needs %d instance types cheaper than the node; %d are", SpotToSpotMinTypes, len(cheaper))
	}
	sort.SliceStable(cheaper, func(i, j int) bool {
		if cheaper[i].off.Price != cheaper[j].off.Price {
			return cheaper[i].off.Price < cheaper[j].off.Price
		}
		return cheaper[i].it.Name < cheaper[j].it.Name
	})
	cheaper = cheaper[:SpotToSpotMinTypes]
	out := *repl
	out.InstanceTypes = nil
	var names []string
	for _, o := range cheaper {
		out.InstanceTypes = append(out.InstanceTypes, o.it)
		names = append(names, o.it.Name)
	}
	out.InstanceType, out.Offering = cheaper[0].it, cheaper[0].off
	out.Requirements = repl.Requirements.Copy()
	out.Requirements[corev1.LabelInstanceTypeStable] = requirements.MustRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...)
	out.Requirements[v1.LabelCapacityType] = requirements.MustRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeSpot)
	return &out, ""
}

// pinSpot pins replacements priced as spot to spot: the savings assume the
// spot price, and a replacement that fell back to on-demand when spot
// capacity ran out could cost more than the node it replaced.
func pinSpot(repl []*scheduling.NewNodeClaim) []*scheduling.NewNodeClaim {
	out := make([]*scheduling.NewNodeClaim, len(repl))
	for i, r := range repl {
		out[i] = r
		if r.Offering.CapacityType != v1.CapacityTypeSpot {
			continue
		}
		if ct := r.Requirements[v1.LabelCapacityType]; ct != nil && ct.Len() == 1 {
			continue
		}
		cp := *r
		cp.Requirements = r.Requirements.Copy()
		cp.Requirements[v1.LabelCapacityType] = requirements.MustRequirement(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeSpot)
		out[i] = &cp
	}
	return out
}

// admitted are the pool's instance types its own requirement on
// node.kubernetes.io/instance-type lets it launch. spotToSpot widens a
// replacement beyond the types its plan chose, and the replacement's own
// requirement on the key is that plan's list: the pool's is the limit.
func admitted(p scheduling.NodePool) []*cloudprovider.InstanceType {
	reqs, err := requirements.FromNodeSelectorRequirements(p.NodePool.Spec.Template.Spec.Requirements...)
	byName := reqs[corev1.LabelInstanceTypeStable]
	if err != nil || byName == nil {
		return p.InstanceTypes
	}
	var out []*cloudprovider.InstanceType
	for _, it := range p.InstanceTypes {
		if byName.Has(it.Name) {
			out = append(out, it)
		}
	}
	return out
}
