package scheduling

import (
	"math"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
)

// squeezeState is a new node's cheapest type and the room left on it.
type squeezeState struct {
	price float64
	typ   *itype
	slack resources.Resources
}

// squeeze moves single pods off nodes whose cheapest type would step down
// without them, onto nodes whose cheapest type already has the room. Each
// move leaves the receiving node's price unchanged and lowers the donor's,
// so the plan only gets cheaper. It recovers what packing loses to
// instance-type granularity: a node needing 4.3 CPUs buys 5. A moving pod
// leaves its topology counts first and passes the full placement check on
// the receiver, so spread, affinity and anti-affinity still hold.
func (s *solver) squeeze() {
	// Receivers are scanned per pool in plan order, with their state beside
	// them: a map lookup per candidate was a fifth of the squeeze.
	byPool := map[*pool][]squeezeSlot{}
	at := map[*node]int{}
	for _, n := range s.virtual {
		if m := s.measure(n, math.Inf(1)); m != nil {
			at[n] = len(byPool[n.pool])
			byPool[n.pool] = append(byPool[n.pool], squeezeSlot{n: n, st: m})
		}
	}
	donors := append([]*node{}, s.virtual...)
	sort.SliceStable(donors, func(i, j int) bool { return donors[i].name < donors[j].name })
	for _, d := range donors {
		i, ok := at[d]
		if !ok {
			continue
		}
		slots := byPool[d.pool]
		for moved := true; moved; {
			moved = false
			ds := slots[i].st
			if ds == nil {
				break
			}
			// Pods of one group on the donor give one answer until a move.
			tried := map[*podGroup]bool{}
			for k, pod := range d.pods {
				g := s.groupOf[pod]
				if g == nil || tried[g] || !movable(g) {
					continue
				}
				tried[g] = true
				without := *d
				without.used = d.used.Sub(g.requests)
				if s.measure(&without, ds.price-1e-9) == nil {
					continue
				}
				s.uncount(g, d)
				r := s.receiver(d, g, slots)
				if r < 0 {
					s.recount(g, d)
					continue
				}
				d.pods = append(d.pods[:k:k], d.pods[k+1:]...)
				d.used = without.used
				if d.groups[g]--; d.groups[g] == 0 {
					delete(d.groups, g)
				}
				// commit counts the pod as newly placed; it is not.
				g.remaining++
				g.shape.remaining++
				s.commit(g, g.variants[0], slots[r].n, pod)
				slots[r].st.slack = slots[r].st.slack.Sub(g.requests)
				slots[i].st = s.measure(d, math.Inf(1))
				moved = true
				break
			}
		}
	}
}

// squeezeSlot is a new node and its squeeze state, nil once it cannot be sized.
type squeezeSlot struct {
	n  *node
	st *squeezeState
}

// movable pods have no preferences (whose relaxation is not recorded) and
// no host ports or extended resources.
func movable(g *podGroup) bool {
	return g.err == nil && len(g.hostPorts) == 0 && len(g.requests.Ext) == 0 && len(g.variants) == 2
}

// uncount takes a pod of g on n out of the topology counts.
func (s *solver) uncount(g *podGroup, n *node) {
	for _, tg := range g.matchedBy {
		if d, ok := single(n.values(tg.key)); ok && tg.filter.passes(n) {
			s.bump(tg.counts, d, -1)
		}
	}
	for _, tg := range g.ownedAnti {
		if d, ok := single(n.values(tg.key)); ok {
			s.bump(tg.owners, d, -1)
		}
	}
}

// recount undoes uncount.
func (s *solver) recount(g *podGroup, n *node) {
	for _, tg := range g.matchedBy {
		if d, ok := single(n.values(tg.key)); ok && tg.filter.passes(n) {
			tg.counts[d]++
		}
	}
	for _, tg := range g.ownedAnti {
		if d, ok := single(n.values(tg.key)); ok {
			tg.owners[d]++
		}
	}
}

func single(vals []string) (string, bool) {
	if len(vals) == 1 {
		return vals[0], true
	}
	return "", false
}

// measure is the node's cheapest type under below, or nil when none under
// below carries it.
func (s *solver) measure(n *node, below float64) *squeezeState {
	if len(n.pool.minValues) == 0 {
		o, ok := s.cheapest(n, below)
		if !ok {
			return nil
		}
		return &squeezeState{price: o.price, typ: o.t, slack: o.t.free.Sub(n.used)}
	}
	nc := s.rightSize(n, false)
	if nc == nil || nc.Price() >= below {
		return nil
	}
	for _, t := range n.pool.types {
		if t.it == nc.InstanceType {
			return &squeezeState{price: nc.Price(), typ: t, slack: t.free.Sub(n.used)}
		}
	}
	return nil
}

// receiver finds another node of the donor's pool whose cheapest type takes
// a pod of g without growing and where the pod may run, as its index in
// slots, or -1.
func (s *solver) receiver(d *node, g *podGroup, slots []squeezeSlot) int {
	pc := g.variants[0]
	for i, sl := range slots {
		if sl.n == d || sl.st == nil || !g.requests.Fits(sl.st.slack) {
			continue
		}
		if !s.groupTypeCompatible(g, d.pool, sl.st.typ) || s.check(g, pc, sl.n) != nil {
			continue
		}
		return i
	}
	return -1
}
