package scheduling

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
)

// rejection says why a pod does not fit a node. Monotonic rejections only
// get worse as nodes fill (resources, taints, labels, anti-affinity), so
// scans may skip those nodes for later pods of the same group.
type rejection struct {
	err        error
	monotonic  bool
	exceedsCap bool
}

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
				failed = append(failed, PodError{Pod: pod, Reason: err.Error()})
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
				failed = append(failed, PodError{Pod: pg.pods[len(pg.pods)-pg.remaining], Reason: err.Error()})
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

// check tests a pod against a node without changing anything.
func (s *solver) check(pg *podGroup, pc *podConstraints, n *node) *rejection {
	if n.deleting {
		return &rejection{err: errors.New("node is being deleted"), monotonic: true}
	}
	if !pg.requests.Add(n.used).Fits(n.capacity) {
		return &rejection{err: errors.New("insufficient resources"), monotonic: true, exceedsCap: true}
	}
	if t, bad := pg.untolerated(n.taints, pc.toleratePreferNoSchedule); bad {
		return &rejection{err: fmt.Errorf("did not tolerate taint %s", taintString(t)), monotonic: true}
	}
	if err := s.nodeCompatible(n, pc); err != nil {
		return &rejection{err: err, monotonic: true}
	}
	if rej := s.checkAttach(pg, n); rej != nil {
		return rej
	}
	for _, hp := range pg.hostPorts {
		for _, used := range n.hostPorts {
			if hp.Conflicts(used) {
				return &rejection{err: fmt.Errorf("host port %d/%s is in use", hp.Port, hp.Protocol), monotonic: true}
			}
		}
	}
	if _, err := s.decideDomains(pg, pc, n); err != nil {
		// Spread and affinity can open up as other pods land; anti-affinity
		// and per-node spread cannot.
		mono := true
		for _, g := range pc.spreads {
			if g.key != corev1.LabelHostname {
				mono = false
			}
		}
		if len(pc.affinity) > 0 {
			mono = false
		}
		return &rejection{err: err, monotonic: mono}
	}
	if !n.existing && len(n.pool.minValues) > 0 && s.opts.MinValuesPolicy == MinValuesPolicyStrict {
		if err := s.minValuesReachable(pg, pc, n); err != nil {
			return &rejection{err: err, monotonic: true}
		}
	}
	return nil
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// nodeCompatible checks the pod's node predicates against what the node's
// labels can be: for an existing node its labels; for a new node its
// NodePool's requirements and its instance type's labels together.
func (s *solver) nodeCompatible(n *node, pc *podConstraints) error {
	if n.existing {
		return n.requirements.Compatible(pc.nodeReqs)
	}
	return labelsCompatible(n.requirements, n.target.reqs, pc.nodeReqs)
}

// decideDomains picks, for every topology key the pod involves, the domain
// the node will be in, honouring spread, affinity and anti-affinity.
func (s *solver) decideDomains(pg *podGroup, pc *podConstraints, n *node) (map[string]string, error) {
	keys := pc.topologyKeys(pg)
	if len(keys) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(keys))
	for _, key := range keys {
		allowed, err := s.allowedDomains(pc, pg, n, key)
		if err != nil {
			return nil, err
		}
		if r, ok := pc.nodeReqs[key]; ok {
			filtered := allowed[:0:0]
			for _, d := range allowed {
				if r.Has(d) {
					filtered = append(filtered, d)
				}
			}
			allowed = filtered
		}
		if len(allowed) == 0 {
			return nil, fmt.Errorf("no %s domain satisfies the pod's constraints", key)
		}
		out[key] = s.pickDomain(pg, pc, key, allowed)
	}
	return out, nil
}

// pickDomain balances: the domain where the pod's spread groups (own or
// matched) have the fewest pods; ties go to the first name.
func (s *solver) pickDomain(pg *podGroup, pc *podConstraints, key string, allowed []string) string {
	if len(allowed) == 1 {
		return allowed[0]
	}
	var g *topoGroup
	for _, c := range append(append([]*topoGroup{}, pc.spreads...), pg.matchedBy...) {
		if c.key == key && c.kind == topoSpread {
			g = c
			break
		}
	}
	if g == nil {
		return allowed[0]
	}
	best := allowed[0]
	for _, d := range allowed[1:] {
		if g.counts[d] < g.counts[best] {
			best = d
		}
	}
	return best
}

// commit places the pod on the node and records it everywhere.
func (s *solver) commit(pg *podGroup, pc *podConstraints, n *node, pod *corev1.Pod) {
	domains, _ := s.decideDomains(pg, pc, n)
	s.touchNode(n)
	s.touchGroup(pg)
	n.used = n.used.Add(pg.requests)
	n.pods = append(n.pods, pod)
	n.hostPorts = append(n.hostPorts, pg.hostPorts...)
	s.attachTo(n, pg.attachments)
	n.groups[pg]++
	pg.remaining--
	if pg.shape != nil {
		pg.shape.remaining--
	}
	if !n.existing {
		for k, p := range pc.nodeReqs {
			if r, ok := n.requirements[k]; ok {
				n.requirements[k] = r.Intersect(p)
			} else if _, tok := n.target.reqs[k]; !tok && !p.AbsentOK() {
				n.requirements[k] = p
			}
		}
		for k, d := range domains {
			if k == corev1.LabelHostname {
				continue
			}
			n.requirements[k] = requirements.In(k, d)
		}
	}
	domainOf := func(key string) (string, bool) {
		if d, ok := domains[key]; ok {
			return d, true
		}
		vals := n.values(key)
		if len(vals) == 1 {
			return vals[0], true
		}
		return "", false
	}
	for _, g := range pg.matchedBy {
		if d, ok := domainOf(g.key); ok && g.filter.passes(n) {
			s.bump(g.counts, d, 1)
		}
	}
	for _, g := range pg.ownedAnti {
		if d, ok := domainOf(g.key); ok {
			s.bump(g.owners, d, 1)
		}
	}
	if n.existing {
		s.plan.Existing[pod.Namespace+"/"+pod.Name] = n.name
	}
}

// openFor opens a new node for the pod in the first NodePool (by weight)
// that can run it, choosing the instance type by lookahead.
func (s *solver) openFor(pg *podGroup, pc *podConstraints, pod *corev1.Pod) (*node, error) {
	var reasons []string
	for _, p := range s.pools {
		n, err := s.openIn(p, pg, pc)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("nodepool %q: %v", p.name, err))
			continue
		}
		s.commit(pg, pc, n, pod)
		return n, nil
	}
	if len(reasons) == 0 {
		return nil, errors.New("no NodePools are ready to launch nodes")
	}
	return nil, errors.New("no NodePool can run the pod: " + strings.Join(reasons, "; "))
}

func (s *solver) openIn(p *pool, pg *podGroup, pc *podConstraints) (*node, error) {
	if p.err != nil {
		return nil, p.err
	}
	if t, bad := pg.untolerated(p.taints, pc.toleratePreferNoSchedule); bad {
		return nil, fmt.Errorf("did not tolerate taint %s", taintString(t))
	}
	if err := p.reqs.Compatible(s.podNodeReqs(pc, p)); err != nil {
		return nil, err
	}
	if limit, ok := p.limits["nodes"]; ok && p.nodes+1 > limit.Value() {
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
	case inLimits == 0:
		return nil, fmt.Errorf("all available instance types exceed limits for nodepool: %q (limits %s, in use %s)", p.name, limitsString(p.limits), p.usage)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.eff > b.eff*(1+1e-9) || a.eff < b.eff*(1-1e-9) {
			return a.eff > b.eff
		}
		return a.value > b.value
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
		p.usage = p.usage.Add(c.t.cap)
		p.nodes++
		return n, nil
	}
	return nil, rejected
}

func (s *solver) newNode(p *pool, t *itype) *node {
	reqs := p.reqs.Copy()
	for _, k := range []string{corev1.LabelTopologyZone, v1.LabelCapacityType} {
		if r, ok := reqs[k]; ok {
			reqs[k] = r.Intersect(t.reqs[k])
		}
	}
	return &node{name: "candidate", pool: p, requirements: reqs, taints: p.taints, capacity: t.free, target: t, groups: map[*podGroup]int{}}
}

func (p *pool) withinLimits(capacity resources.Resources) bool {
	if len(p.limits) == 0 {
		return true
	}
	after := p.usage.Add(capacity).ResourceList()
	for name, limit := range p.limits {
		if name == "nodes" {
			continue
		}
		if q, ok := after[name]; ok && q.Cmp(limit) > 0 {
			return false
		}
	}
	return true
}

func limitsString(rl corev1.ResourceList) string {
	keys := make([]string, 0, len(rl))
	for k := range rl {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := rl[corev1.ResourceName(k)]
		parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
	}
	return strings.Join(parts, ",")
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

// finish right-sizes every new node to the cheapest instance type that holds
// its pods and writes the plan.
func (s *solver) finish() {
	s.squeeze()
	s.merge()
	for _, n := range s.virtual {
		nc, err := s.size(n, true)
		if err != nil {
			// Placement checks minValues as pods join; this catches what
			// only the cap on options shows.
			for _, pod := range n.pods {
				s.plan.Unschedulable = append(s.plan.Unschedulable, PodError{Pod: pod, Reason: fmt.Sprintf("nodepool %q: %v", n.pool.name, err)})
			}
			continue
		}
		s.plan.NewNodeClaims = append(s.plan.NewNodeClaims, nc)
	}
}

// mergeCandidates bounds the merge pass to the emptiest nodes; full nodes
// gain nothing from merging and the pass is quadratic.
const mergeCandidates = 24

// merge joins pairs of new nodes into one when a single instance type costs
// no more than the two: the tail of a greedy packing often leaves two
// half-empty nodes, and one node also carries one set of DaemonSet pods.
// Only nodes whose pods have no topology constraints or host ports move, so
// no constraint needs re-checking.
func (s *solver) merge() {
	var cands []*node
	for _, n := range s.virtual {
		if mergeable(n) {
			cands = append(cands, n)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		return cands[i].used.Fraction(cands[i].capacity) < cands[j].used.Fraction(cands[j].capacity)
	})
	if len(cands) > mergeCandidates {
		cands = cands[:mergeCandidates]
	}
	merged := map[*node]bool{}
	for i := 0; i < len(cands); i++ {
		a := cands[i]
		if merged[a] {
			continue
		}
		for j := i + 1; j < len(cands); j++ {
			b := cands[j]
			if merged[b] || a.pool != b.pool {
				continue
			}
			joined, ok := s.join(a, b)
			if !ok {
				continue
			}
			together := s.rightSize(joined, false)
			if together == nil {
				continue
			}
			separate := s.rightSize(a, false).Price() + s.rightSize(b, false).Price()
			if together.Price() <= separate+1e-9 {
				*a = *joined
				merged[b] = true
			}
		}
	}
	if len(merged) == 0 {
		return
	}
	kept := s.virtual[:0]
	for _, n := range s.virtual {
		if !merged[n] {
			kept = append(kept, n)
		} else {
			n.pool.usage = n.pool.usage.Sub(n.target.cap)
			n.pool.nodes--
		}
	}
	s.virtual = kept
}

// mergeable nodes hold only pods without topology constraints or host
// ports, so their pods may share any node without re-checking.
func mergeable(n *node) bool {
	for g := range n.groups {
		if len(g.matchedBy) > 0 || len(g.hostPorts) > 0 || len(g.variants[0].topologyKeys(g)) > 0 {
			return false
		}
	}
	return true
}

// join returns a node holding both nodes' pods, if some instance type of
// the pool can hold them under both nodes' requirements.
func (s *solver) join(a, b *node) (*node, bool) {
	reqs := a.requirements.Copy()
	for k, r := range b.requirements {
		if cur, ok := reqs[k]; ok {
			r = cur.Intersect(r)
		}
		if r.Empty() {
			return nil, false
		}
		reqs[k] = r
	}
	used := a.used.Add(b.used)
	target := a.target
	if b.target.price > target.price {
		target = b.target
	}
	groups := make(map[*podGroup]int, len(a.groups)+len(b.groups))
	for g, c := range a.groups {
		groups[g] += c
	}
	for g, c := range b.groups {
		groups[g] += c
	}
	j := &node{name: a.name, pool: a.pool, requirements: reqs, taints: a.taints, used: used, target: target,
		capacity: target.free, groups: groups, attach: joinAttachments(a, b),
		pods: append(append([]*corev1.Pod{}, a.pods...), b.pods...)}
	return j, true
}

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
		if !n.used.Fits(t.free) || !extendedOK(n.used, t.alloc) {
			continue
		}
		if len(narrowed) > 0 && s.typeCompatible(narrowed, t.reqs) != nil {
			continue
		}
		if t != n.target && !p.withinLimits(t.cap.Sub(n.target.cap)) {
			continue
		}
		if !s.podsCompatibleWithType(n, t) || !n.attachFits(t) {
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
			p.usage = p.usage.Sub(n.target.cap)
			p.nodes--
		}
		return nil, short[0]
	}
	if commit {
		p.usage = p.usage.Sub(n.target.cap).Add(chosen[0].t.cap)
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

// podsCompatibleWithType re-checks the node's pods against another type's
// labels, since pods may select on instance labels the target satisfied.
func (s *solver) podsCompatibleWithType(n *node, t *itype) bool {
	if t == n.target {
		return true
	}
	for g := range n.groups {
		if !s.groupTypeCompatible(g, n.pool, t) {
			return false
		}
	}
	return true
}
