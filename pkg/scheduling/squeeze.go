package scheduling

import (
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
	st := map[*node]*squeezeState{}
	for _, n := range s.virtual {
		if m := s.measure(n); m != nil {
			st[n] = m
		}
	}
	donors := append([]*node{}, s.virtual...)
	sort.SliceStable(donors, func(i, j int) bool { return donors[i].name < donors[j].name })
	for _, d := range donors {
		for moved := true; moved; {
			moved = false
			ds := st[d]
			if ds == nil {
				break
			}
			for i, pod := range d.pods {
				g := s.groupOf[pod]
				if g == nil || !movable(g) {
					continue
				}
				without := *d
				without.used = d.used.Sub(g.requests)
				lighter := s.measure(&without)
				if lighter == nil || lighter.price >= ds.price-1e-9 {
					continue
				}
				s.uncount(g, d)
				r := s.receiver(d, g, st)
				if r == nil {
					s.recount(g, d)
					continue
				}
				d.pods = append(d.pods[:i:i], d.pods[i+1:]...)
				d.used = without.used
				if d.groups[g]--; d.groups[g] == 0 {
					delete(d.groups, g)
				}
				// commit counts the pod as newly placed; it is not.
				g.remaining++
				g.shape.remaining++
				s.commit(g, g.variants[0], r, pod)
				st[r].slack = st[r].slack.Sub(g.requests)
				st[d] = s.measure(d)
				moved = true
				break
			}
		}
	}
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

func (s *solver) measure(n *node) *squeezeState {
	nc := s.rightSize(n, false)
	if nc == nil {
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
// a pod of g without growing and where the pod may run.
func (s *solver) receiver(d *node, g *podGroup, st map[*node]*squeezeState) *node {
	pc := g.variants[0]
	for _, r := range s.virtual {
		rs := st[r]
		if r == d || r.pool != d.pool || rs == nil || !g.requests.Fits(rs.slack) {
			continue
		}
		if !s.groupTypeCompatible(g, r.pool, rs.typ) || s.check(g, pc, r) != nil {
			continue
		}
		return r
	}
	return nil
}
