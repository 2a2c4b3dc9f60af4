package scheduling

import (
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
)

// hostnameAffinity reports whether pc ties the pod to nodes holding pods
// its required affinity selects: a new node never qualifies unless the
// pod selects itself.
func hostnameAffinity(pc *podConstraints) bool {
	for _, g := range pc.affinity {
		if g.key == corev1.LabelHostname {
			return true
		}
	}
	return false
}

// growFor places a pod whose hostname affinity ties it to planned nodes
// that are full, by moving one of them to a larger instance type of its
// pool. The targets of such a pod, pending in the same batch, are packed
// before it is known to need room beside them; Karpenter, which keeps a
// NodeClaim's instance type open until it launches, grows the NodeClaim
// the same way. Only nodes not yet launched grow.
func (s *solver) growFor(pg *podGroup, pc *podConstraints, pod *corev1.Pod) bool {
	for _, n := range s.virtual {
		if n.deleting || pg.requests.Add(n.used).Fits(n.capacity) {
			continue // not full: the scan already had its say
		}
		if err := s.domainsAllowed(pg, pc, n); err != nil {
			continue // no target pod here, or another constraint fails
		}
		t := s.largerType(n, pg, pc)
		if t == nil {
			continue
		}
		old := n.target
		s.touchNode(n)
		n.target, n.capacity = t, t.free
		if s.check(pg, pc, n) != nil {
			n.target, n.capacity = old, old.free
			continue
		}
		s.touchPool(n.pool)
		n.pool.charge(t.cap, old.cap, 0)
		s.commit(pg, pc, n, pod)
		return true
	}
	return false
}

// largerType is the cheapest instance type the node could move to and
// still hold its pods and a pod of pg: same pool, compatible with what its
// pods narrowed and with pc, offered in its zone and capacity type, within
// the pool's limits, and counted alike by every topology filter of its
// pods. nil when there is none.
func (s *solver) largerType(n *node, pg *podGroup, pc *podConstraints) *itype {
	p := n.pool
	need := n.used.Add(pg.requests)
	zoneReq, ctReq := n.requirements[corev1.LabelTopologyZone], n.requirements[v1.LabelCapacityType]
	accept := func(o cloudprovider.Offering) bool {
		return (zoneReq == nil || zoneReq.Has(o.Zone)) && (ctReq == nil || ctReq.Has(o.CapacityType))
	}
	for _, t := range p.types {
		switch {
		case t == n.target || !need.Fits(t.free) || !extendedOK(need, t.alloc):
		case s.typeCompatible(n.requirements, t.reqs) != nil || labelsCompatible(n.requirements, t.reqs, pc.nodeReqs) != nil:
		case !s.podsCompatibleWithType(n, t) || !p.withinLimits(t.cap.Sub(n.target.cap)) || !s.countedAlike(n, t):
		default:
			if _, ok := t.it.CheapestOffering(accept); ok {
				return t
			}
		}
	}
	return nil
}

// countedAlike reports whether the node's pods would count for the same
// topology spreads on type t as on its current type: spread filters judge
// a new node by its type's labels.
func (s *solver) countedAlike(n *node, t *itype) bool {
	moved := *n
	moved.target = t
	for g := range n.groups {
		for _, tg := range g.matchedBy {
			if tg.filter != nil && tg.filter.passes(n) != tg.filter.passes(&moved) {
				return false
			}
		}
	}
	return true
}
