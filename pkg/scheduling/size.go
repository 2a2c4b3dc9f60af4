package scheduling

import (
	"errors"
	"math"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
)

// rightSize picks the cheapest instance type for the node's pods and the
// options to launch with, or returns nil when the node cannot be launched:
// no type holds its pods, or, under the Strict policy, its options cannot
// meet a minValues. commit records the choice in the pool's usage.
func (s *solver) rightSize(n *node, commit bool) *NewNodeClaim {
	nc, _ := s.size(n, commit)
	return nc
}

// narrowed are the node's requirements that its pods narrowed, but zone
// and capacity type: only those need checking against a type, since every
// type of the pool satisfies the pool's own requirements and offerings
// decide zone and capacity type.
func (n *node) narrowed() requirements.Requirements {
	out := requirements.Requirements{}
	for k, r := range n.requirements {
		if k == corev1.LabelTopologyZone || k == v1.LabelCapacityType {
			continue
		}
		if pr, ok := n.pool.reqs[k]; !ok || pr != r {
			out[k] = r
		}
	}
	return out
}

// offeringFilter accepts the offerings in the zones and capacity types
// allowed; a nil requirement allows any.
func offeringFilter(zoneReq, ctReq *requirements.Requirement) func(cloudprovider.Offering) bool {
	return func(o cloudprovider.Offering) bool {
		return (zoneReq == nil || zoneReq.Has(o.Zone)) && (ctReq == nil || ctReq.Has(o.CapacityType))
	}
}

// holds says whether type t can carry node n: its pods fit and may run on
// it, the pool stays within its limits, and volumes can attach.
func (s *solver) holds(n *node, t *itype, narrowed requirements.Requirements) bool {
	if !n.used.Fits(t.free) || !extendedOK(n.used, t.alloc) {
		return false
	}
	if len(narrowed) > 0 && s.typeCompatible(narrowed, t.reqs) != nil {
		return false
	}
	if t != n.target && !n.pool.withinLimits(t.cap.Sub(n.target.cap)) {
		return false
	}
	return s.podsCompatibleWithType(n, t) && n.attachFits(t)
}

// cheapest is the option size would list first for a node of a pool
// without minValues, priced under below; ok is false when no type under
// below carries the node. It builds no claim: squeeze asks it thousands of
// times whether a node would step down, and most answers are no after the
// few types cheaper than the node's own.
func (s *solver) cheapest(n *node, below float64) (best option, ok bool) {
	accept := offeringFilter(n.requirements[corev1.LabelTopologyZone], n.requirements[v1.LabelCapacityType])
	narrowed := n.narrowed()
	for _, t := range n.pool.types {
		if t.price >= below || (ok && t.price > best.price) {
			break
		}
		if !s.holds(n, t, narrowed) {
			continue
		}
		off, found := t.it.CheapestOffering(accept)
		if !found || off.Price >= below {
			continue
		}
		if !ok || off.Price < best.price || (off.Price == best.price && t.it.Name < best.t.it.Name) {
			best, ok = option{t: t, price: off.Price, off: off}, true
		}
	}
	return best, ok
}

// size is rightSize, saying why a node cannot be launched.
func (s *solver) size(n *node, commit bool) (*NewNodeClaim, error) {
	p := n.pool
	accept := offeringFilter(n.requirements[corev1.LabelTopologyZone], n.requirements[v1.LabelCapacityType])
	narrowed := n.narrowed()
	hasMinValues := len(p.minValues) > 0
	var opts []option
	bound := math.Inf(1)
	for _, t := range p.types {
		// p.types is in order of each type's cheapest offering, a lower
		// bound of its price on this node.
		if t.price > bound && !hasMinValues {
			break
		}
		if !s.holds(n, t, narrowed) {
			continue
		}
		off, ok := t.it.CheapestOffering(accept)
		if !ok {
			continue
		}
		opts = append(opts, option{t: t, price: off.Price, off: off})
		if b := off.Price * s.opts.PriceBand; b < bound {
			bound = b
		}
	}
	sort.SliceStable(opts, func(i, j int) bool {
		if opts[i].price != opts[j].price {
			return opts[i].price < opts[j].price
		}
		return opts[i].t.it.Name < opts[j].t.it.Name
	})
	if len(opts) == 0 {
		if !commit {
			return nil, errors.New("no instance type holds the pods") // a trial
		}
		// The target always fits a committed node; this guards against a bug, not input.
		off, _ := n.target.it.CheapestOffering(accept)
		opts = []option{{t: n.target, price: off.Price, off: off}}
	}
	chosen, short := s.chooseOptions(n, opts, accept)
	if len(short) > 0 && s.opts.MinValuesPolicy == MinValuesPolicyStrict {
		if commit {
			p.charge(resources.Resources{}, n.target.cap, -1)
		}
		return nil, short[0]
	}
	if commit {
		p.charge(chosen[0].t.cap, n.target.cap, 0)
	}

	nc := &NewNodeClaim{NodePool: p.name, Pods: n.pods, Requests: n.used.Add(chosen[0].t.overhead), InstanceType: chosen[0].t.it, Offering: chosen[0].off}
	reqs := n.requirements.Copy()
	names := make([]string, 0, len(chosen))
	zones, cts := map[string]struct{}{}, map[string]struct{}{}
	for _, o := range chosen {
		nc.InstanceTypes = append(nc.InstanceTypes, o.t.it)
		names = append(names, o.t.it.Name)
		for _, off := range o.t.it.Offerings {
			if off.Available && accept(off) {
				zones[off.Zone] = struct{}{}
				cts[off.CapacityType] = struct{}{}
			}
		}
	}
	reqs.Add(requirements.In(corev1.LabelInstanceTypeStable, names...))
	reqs.Add(requirements.InSet(corev1.LabelTopologyZone, zones))
	reqs.Add(requirements.InSet(v1.LabelCapacityType, cts))
	for _, sf := range short {
		reqs[sf.key] = sf.relaxed(reqs[sf.key])
		nc.MinValuesRelaxed = true
	}
	nc.Requirements = reqs
	return nc, nil
}
