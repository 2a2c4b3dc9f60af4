package scheduling

import (
	"math"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/lpbound"
)

// lpRound packs the bulk of the pods with no topology constraints by rounding
// the LP relaxation: the relaxation says which node kinds to buy and how to
// mix the pod shapes on each, and whole copies of that per-node mix are opened
// straight away. Greedy packing then only has the remainder to place. With
// thousands of pods this takes the plan to within a few percent of the bound,
// where a purely greedy packer leaves each node's scarcer resource idle.
//
// Only the highest-priority pool a group fits is used, as NodePool weights
// demand; pods with constraints, preferences, host ports or extended
// resources are left to the greedy pass, as are pods that fit existing nodes.
func (s *solver) lpRound() {
	var p *pool
	for _, cand := range s.pools {
		if cand.err == nil && len(cand.types) > 0 {
			p = cand
			break
		}
	}
	if p == nil {
		return
	}
	var groups []*podGroup
	for _, g := range s.groups {
		if s.roundable(g, p) {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return
	}
	// Room on existing nodes and on nodes already planned comes first, as
	// in the greedy pass.
	for _, nodes := range [][]*node{s.existing, s.virtual} {
		for _, g := range groups {
			pc := g.variants[0]
			cursor := 0
			for g.remaining > 0 {
				n := s.scan(g, pc, nodes, &cursor)
				if n == nil {
					break
				}
				s.commit(g, pc, n, g.pods[len(g.pods)-g.remaining])
			}
		}
	}
	kinds := make([]lpbound.Kind, 0, len(p.types))
	for _, t := range p.types {
		free := t.free
		kinds = append(kinds, lpbound.Kind{Name: t.it.Name, Price: t.price, Capacity: []float64{float64(free.CPU), float64(free.Memory), float64(free.Pods), float64(free.Ephemeral)}})
	}
	var shapes []lpbound.Shape
	var shapeGroups []*podGroup
	for _, g := range groups {
		if g.remaining == 0 {
			continue
		}
		sh := lpbound.Shape{Count: float64(g.remaining), Request: []float64{float64(g.requests.CPU), float64(g.requests.Memory), float64(g.requests.Pods), float64(g.requests.Ephemeral)}}
		for i, t := range p.types {
			if s.groupTypeCompatible(g, p, t) && g.requests.Fits(t.free) {
				sh.Kinds = append(sh.Kinds, i)
			}
		}
		if len(sh.Kinds) == 0 {
			continue
		}
		shapes = append(shapes, sh)
		shapeGroups = append(shapeGroups, g)
	}
	if len(shapes) == 0 {
		return
	}
	res, err := lpbound.Bound(kinds, shapes)
	if err != nil {
		return // the greedy pass still places everything
	}
	byKind := map[int][]lpbound.Assignment{}
	for _, a := range res.Assignments {
		byKind[a.Kind] = append(byKind[a.Kind], a)
	}
	kindOrder := make([]int, 0, len(byKind))
	for k := range byKind {
		kindOrder = append(kindOrder, k)
	}
	sort.Ints(kindOrder)
	for _, k := range kindOrder {
		t := p.types[k]
		y := res.Nodes[t.it.Name]
		whole := math.Floor(y + 1e-9)
		if whole < 1 {
			continue
		}
		per := make([]int64, len(byKind[k]))
		any := false
		for i, a := range byKind[k] {
			per[i] = int64(math.Floor(a.Pods/y + 1e-9))
			any = any || per[i] > 0
		}
		if !any {
			continue
		}
		for range int(whole) {
			if !p.withinLimits(t.cap) {
				return
			}
			if limit, ok := p.limits["nodes"]; ok && p.nodes+1 > limit.Value() {
				return
			}
			n := s.newNode(p, t)
			placed := false
			for i, a := range byKind[k] {
				g := shapeGroups[a.Shape]
				pc := g.variants[0]
				for q := per[i]; q > 0 && g.remaining > 0; q-- {
					if s.check(g, pc, n) != nil {
						break
					}
					if !placed {
						n.name = p.name + "-" + itoa(len(s.virtual)+1)
						s.virtual = append(s.virtual, n)
						p.usage = p.usage.Add(t.cap)
						p.nodes++
						placed = true
					}
					s.commit(g, pc, n, g.pods[len(g.pods)-g.remaining])
				}
			}
		}
	}
}

// roundable reports whether a group's pods may be placed by LP rounding:
// nothing about them depends on where other pods go.
func (s *solver) roundable(g *podGroup, p *pool) bool {
	// Pods with limited volumes each form a group of their own: too many
	// shapes for the relaxation, and the greedy pass counts attachments.
	if g.err != nil || g.remaining == 0 || len(g.hostPorts) > 0 || len(g.requests.Ext) > 0 || len(g.attachments) > 0 {
		return false
	}
	// A ladder of two is the strict variant and the one tolerating
	// PreferNoSchedule: the pods have no preferences to honour.
	if len(g.variants) != 2 || len(g.matchedBy) > 0 || len(g.inverseAnti) > 0 || len(g.ownedAnti) > 0 {
		return false
	}
	pc := g.variants[0]
	if len(pc.spreads) > 0 || len(pc.affinity) > 0 || len(pc.antiAffinity) > 0 {
		return false
	}
	return s.groupPoolCompatible(g, p)
}

func itoa(n int) string {
	const digits = "0123456789"
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{digits[n%10]}, b...)
		n /= 10
	}
	return string(b)
}
