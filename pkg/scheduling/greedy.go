package scheduling

import (
	"errors"
	"fmt"
	"slices"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	corev1 "k8s.io/api/core/v1"
)

// run places every group that keep selects, in order. settle ends the
// solve: groups left waiting for other pods are retried, then reported.
func (s *solver) run(keep func(*podGroup) bool, settle bool) {
	var groups []*podGroup
	for _, pg := range s.groups {
		if keep(pg) {
			groups = append(groups, pg)
		}
	}
	s.plan.Unschedulable = append(s.plan.Unschedulable, s.placeGroups(groups, settle)...)
}

// placeGroups places the pending pods of groups, in order, and returns
// those that fit nowhere. A group that fails because of where other pods
// are (it has required pod affinity, or a spread whose minimum can rise)
// is left pending rather than failed: pods placed after it may be what it
// needs, such as the targets of its affinity pending in the same batch.
// Meanwhile new nodes may pull its pods in as they fill. With settle, such
// groups are retried after the others, pass after pass until one places
// nothing, and what is left is reported; without, they stay pending for a
// later call.
func (s *solver) placeGroups(groups []*podGroup, settle bool) []PodError {
	var failed []PodError
	waiting := map[*podGroup]error{}
	pass := func(groups []*podGroup) {
		for _, pg := range groups {
			if pg.err != nil {
				for _, pod := range pg.pods[len(pg.pods)-pg.remaining:] {
					failed = append(failed, PodError{Pod: pod, Reason: pg.err.Error()})
				}
				pg.remaining = 0
				continue
			}
			delete(waiting, pg)
			cursors := make([]int, len(pg.variants))
			existingCursors := make([]int, len(pg.variants))
			for pg.remaining > 0 {
				pod := pg.pods[len(pg.pods)-pg.remaining]
				err := s.place(pg, pod, cursors, existingCursors)
				if err == nil {
					continue
				}
				if waitsForOthers(pg) {
					waiting[pg] = err
					break
				}
				failed = append(failed, podError(pod, err))
				pg.remaining--
			}
		}
	}
	pass(groups)
	if !settle {
		return failed
	}
	for len(waiting) > 0 {
		var retry []*podGroup
		before := 0
		for _, pg := range groups {
			if _, ok := waiting[pg]; ok && pg.remaining > 0 {
				retry = append(retry, pg)
				before += pg.remaining
			}
		}
		pass(retry)
		after := 0
		for _, pg := range retry {
			after += pg.remaining
		}
		if after == before {
			break
		}
	}
	for _, pg := range groups {
		if err, ok := waiting[pg]; ok {
			for ; pg.remaining > 0; pg.remaining-- {
				failed = append(failed, podError(pg.pods[len(pg.pods)-pg.remaining], err))
			}
		}
	}
	return failed
}

// waitsForOthers reports whether the group's required constraints can
// come to allow a placement as other pods land: pod affinity, and spreads
// over domains other than hostname (whose minimum is always a new, empty
// node).
func waitsForOthers(pg *podGroup) bool {
	pc := pg.variants[len(pg.variants)-1]
	if len(pc.affinity) > 0 {
		return true
	}
	for _, g := range pc.spreads {
		if g.key != corev1.LabelHostname {
			return true
		}
	}
	return false
}

// place puts one pod somewhere, relaxing its preferences as needed.
func (s *solver) place(pg *podGroup, pod *corev1.Pod, cursors, existingCursors []int) error {
	var firstErr error
	for vi, pc := range pg.variants {
		if n := s.scan(pg, pc, s.existing, &existingCursors[vi]); n != nil {
			s.commit(pg, pc, n, pod)
			return nil
		}
		if n := s.scan(pg, pc, s.virtual, &cursors[vi]); n != nil {
			s.commit(pg, pc, n, pod)
			return nil
		}
		n, err := s.openFor(pg, pc, pod)
		if err == nil {
			s.fill(n)
			return nil
		}
		if hostnameAffinity(pc) && s.growFor(pg, pc, pod) {
			return nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// scan returns the first node in nodes (from *cursor on) that takes the pod.
func (s *solver) scan(pg *podGroup, pc *podConstraints, nodes []*node, cursor *int) *node {
	advancing := true
	for i := *cursor; i < len(nodes); i++ {
		n := nodes[i]
		rej := s.check(pg, pc, n)
		if rej == nil {
			return n
		}
		if advancing && rej.monotonic {
			*cursor = i + 1
		} else {
			advancing = false
		}
	}
	return nil
}

// openFor opens a new node for the pod in the first NodePool (by weight)
// that can run it, choosing the instance type by lookahead.
func (s *solver) openFor(pg *podGroup, pc *podConstraints, pod *corev1.Pod) (*node, error) {
	var reasons []PoolReason
	for _, p := range s.pools {
		n, err := s.openIn(p, pg, pc)
		if err != nil {
			// A commitment pool's reason is its NodePool's, or that the
			// room is used up: the NodePool says it.
			if p.room == "" {
				reasons = append(reasons, PoolReason{NodePool: p.name, Reason: err.Error()})
			}
			continue
		}
		s.commit(pg, pc, n, pod)
		return n, nil
	}
	if len(reasons) == 0 {
		return nil, errors.New("no NodePools are ready to launch nodes")
	}
	return nil, &noPoolError{pools: reasons}
}

func (s *solver) openIn(p *pool, pg *podGroup, pc *podConstraints) (*node, error) {
	if p.err != nil {
		return nil, p.err
	}
	if p.roomUsedUp() {
		return nil, errRoomUsedUp
	}
	if t := pg.untolerated(p.taints, pc.toleratePreferNoSchedule); t != nil {
		return nil, fmt.Errorf("did not tolerate taint %s", taintString(*t))
	}
	if err := p.reqs.Compatible(s.podNodeReqs(pc, p)); err != nil {
		return nil, err
	}
	if limit, ok := p.limits["nodes"]; ok && p.acct.nodes+1 > limit.Value() {
		return nil, fmt.Errorf("nodepool %q limit of %s nodes reached", p.name, limit.String())
	}
	type candidate struct {
		t          *itype
		eff, value float64
	}
	var cands []candidate
	reqMatched, fits, inLimits := 0, 0, 0
	// largest is the compatible type with the most room, named when none fits.
	var largest *itype
	// overCap is the type that fits and adds the least to a spend cap it
	// would take the pool over, named when no type is within the limits.
	var overCap *itype
	forced := s.forcedNodes()
	strict := pc == pg.variants[0]
	for _, t := range p.types {
		if strict {
			if !s.groupTypeCompatible(pg, p, t) {
				continue
			}
		} else if s.typeCompatible(pc.nodeReqs, t.reqs) != nil || !extendedOK(pg.requests, t.alloc) {
			continue
		}
		reqMatched++
		if largest == nil || t.free.CPU > largest.free.CPU {
			largest = t
		}
		if !pg.requests.Fits(t.free) {
			continue
		}
		fits++
		if !p.withinLimits(t.cap) {
			if p.overCap(t) && (overCap == nil || t.cap.Of(spendcap.Resource) < overCap.cap.Of(spendcap.Resource)) {
				overCap = t
			}
			continue
		}
		inLimits++
		value, saturated := s.lookahead(p, t, pg, forced)
		cands = append(cands, candidate{t: t, eff: value / t.price, value: value})
		if saturated {
			// Types are in price order: a pricier one cannot absorb more.
			break
		}
	}
	switch {
	case reqMatched == 0:
		return nil, fmt.Errorf("no instance type satisfies the pod's requirements %s", pc.nodeReqs.String())
	case fits == 0:
		return nil, fmt.Errorf("no instance type has room for requests %s plus daemonset overhead (%s on %s, the largest)", pg.requests, largest.overhead, largest.it.Name)
	case inLimits == 0 && overCap != nil:
		return nil, p.capError(overCap)
	case inLimits == 0:
		return nil, fmt.Errorf("all available instance types exceed limits for nodepool: %q (limits %s, in use %s)", p.name, resources.ListString(p.limits), withoutRooms(p.acct.usage))
	}
	// A stable sort of the typed slice: sort.SliceStable's algorithm,
	// negative exactly where its less was true, without reflection.
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if a.eff > b.eff*(1+1e-9) || a.eff < b.eff*(1-1e-9) {
			if a.eff > b.eff {
				return -1
			}
			return 0
		}
		if a.value > b.value {
			return -1
		}
		return 0
	})
	var rejected error
	for _, c := range cands {
		n := s.newNode(p, c.t)
		if rej := s.check(pg, pc, n); rej != nil {
			if rejected == nil {
				rejected = rej.err
			}
			continue
		}
		n.name = fmt.Sprintf("%s-%d", p.name, len(s.virtual)+1)
		s.virtual = append(s.virtual, n)
		s.touchPool(p)
		p.charge(c.t.cap, resources.Resources{}, 1)
		return n, nil
	}
	return nil, rejected
}

// lookahead estimates the work a new node of type t would absorb: the seed
// pod plus as many pending pods as fit, each valued at its lower-bound price.
// Dividing by the node's price ranks types by how well their dollars are used.
// When pods must be kept apart over at least forced nodes, each node expects
// only its fair share of the rest, so the first nodes are not sized to take
// everything while the later ones run nearly empty. saturated reports that
// every share fit, so a pricier type could not do better.
func (s *solver) lookahead(p *pool, t *itype, seed *podGroup, forced int) (value float64, saturated bool) {
	free := t.free.Sub(seed.requests)
	value = seed.value
	saturated = true
	for _, sh := range s.shapes {
		left := int64(sh.remaining)
		if sh == seed.shape {
			left--
		}
		if left <= 0 {
			continue
		}
		if forced > 1 {
			left = (left + int64(forced) - 1) / int64(forced)
		}
		if sh.perNodeLimit > 0 {
			cap := sh.perNodeLimit
			if sh == seed.shape {
				cap--
			}
			if left > cap {
				left = cap
			}
		}
		if left <= 0 {
			continue
		}
		if c := sh.typeOK[t.id]; c == 2 || (c == 0 && !s.shapeTypeOK(sh, t)) {
			continue
		}
		if sh.poolOK[p.idx] != 1 {
			continue
		}
		k := sh.requests.MaxCopies(free, left)
		if k < left {
			saturated = false
		}
		if k == 0 {
			continue
		}
		free = free.Sub(sh.requests.Scale(k))
		value += float64(k) * sh.value
	}
	return value, saturated
}

// shapeTypeOK fills the cache from the shape's representative group.
func (s *solver) shapeTypeOK(sh *shape, t *itype) bool {
	return s.groupTypeCompatible(sh.rep, nil, t)
}

// fill pulls pending pods onto a freshly opened node until nothing else fits.
func (s *solver) fill(n *node) {
	for _, g := range s.groups {
		if g.err != nil {
			continue
		}
		for g.remaining > 0 {
			if !g.requests.Add(n.used).Fits(n.capacity) {
				break
			}
			pc := g.variants[0]
			if s.check(g, pc, n) != nil {
				break
			}
			s.commit(g, pc, n, g.pods[len(g.pods)-g.remaining])
		}
	}
}
