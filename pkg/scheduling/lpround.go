package scheduling

import (
	"math"
	"slices"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/lpbound"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
)

// lpRound packs the pods with no topology constraints by rounding the
// configuration LP (lpbound.Patterns): whole-pod packings of one node each,
// and how many nodes of each the cheapest fractional plan buys. Every
// pattern the plan buys at least once is opened that many times; then the
// remainder is planned again and the pattern it leans on most is opened
// once, until nothing is left (a dive). Each step removes at least one
// node's worth of pods, and what is left at the end is small, so the
// rounding loses at most about a node per shape where the greedy pass,
// filling one node at a time, loses a little on every node.
//
// Each group is rounded in the highest-priority pool it fits, as NodePool
// weights demand. Where a pool's limits stop the rounding, the pods left
// round in their next pool. The limits are not rows of the LP: with them,
// and a price on the pods left over, the LP fills the pool with as many
// pods as fit rather than with those it saves most on, which made the
// offline baseline's spot-over-on-demand workload 15% dearer. Pods with
// constraints, preferences, host ports or extended resources are left to
// the greedy pass, as are pods that fit existing nodes.
func (s *solver) lpRound() {
	full := map[*pool]bool{}
	for _, p := range s.pools {
		if p.err != nil || len(p.types) == 0 {
			continue
		}
		var groups []*podGroup
		for _, g := range s.groups {
			if first := s.firstPool(g, full); first == p && s.roundable(g, p) {
				groups = append(groups, g)
			}
		}
		if len(groups) > 0 && !s.roundPool(p, groups) {
			if p.room != "" {
				s.topUp(p, groups)
			}
			full[p] = true
		}
	}
}

// firstPool is the highest-priority pool g may use that is not full, or nil.
func (s *solver) firstPool(g *podGroup, full map[*pool]bool) *pool {
	if g.err != nil || g.remaining == 0 {
		return nil
	}
	for _, p := range s.pools {
		if p.err == nil && len(p.types) > 0 && !full[p] && s.groupPoolCompatible(g, p) {
			return p
		}
	}
	return nil
}

// roundPool rounds groups' pods into new nodes of pool p. It reports false
// when the pool's limits stopped it, and the pods left are the next pool's.
func (s *solver) roundPool(p *pool, groups []*podGroup) bool {
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
	// Kinds are the pool's types; when some group spreads over zones, also
	// one per type and zone, priced at that zone's cheapest offering, for
	// that group's share in each zone.
	zones := map[*podGroup][]string{}
	for _, g := range groups {
		if zs := s.spreadZones(g); len(zs) > 0 {
			zones[g] = zs
		}
	}
	var kinds []lpbound.Kind
	var kindType []*itype
	var kindZone []string
	for _, t := range p.types {
		capacity := lpVector(t.free)
		kinds = append(kinds, lpbound.Kind{Name: t.it.Name, Price: t.price, Capacity: capacity})
		kindType, kindZone = append(kindType, t), append(kindZone, "")
		if len(zones) == 0 {
			continue
		}
		for _, z := range typeDomains(p, t, corev1.LabelTopologyZone) {
			if price := zonePrice(t, z); !math.IsInf(price, 1) {
				kinds = append(kinds, lpbound.Kind{Name: t.it.Name + "/" + z, Price: price, Capacity: capacity})
				kindType, kindZone = append(kindType, t), append(kindZone, z)
			}
		}
	}
	var shapes []lpbound.Shape
	var rs []*roundShape
	for _, g := range groups {
		if g.remaining == 0 {
			continue
		}
		var ks []int
		zs := zones[g]
		for k, t := range kindType {
			// A zoned share uses its zone's kinds, anything else the
			// kinds of no zone: patterns do not mix the two, which keeps
			// pricing to the kinds each shape can use. With mixZones the
			// rest may use the zones' kinds too.
			zoned := kindZone[k] != ""
			if (zoned == (len(zs) > 0) || (s.mixZones && len(zs) == 0)) && s.groupTypeCompatible(g, p, t) && g.requests.Fits(t.free) && (!zoned || zoneAllowed(g, kindZone[k])) {
				ks = append(ks, k)
			}
		}
		if len(zs) == 0 && len(zones) > 0 && len(p.limits) > 0 {
			s.zonesApart = true
		}
		request := lpVector(g.requests)
		if len(zs) == 0 {
			if len(ks) > 0 {
				shapes = append(shapes, lpbound.Shape{Request: request, Kinds: ks})
				rs = append(rs, &roundShape{g: g, pc: g.variants[0], left: -1})
			}
			continue
		}
		// floor(n/zones) in each zone; the remainder is the greedy pass's,
		// which places it where the skew allows. The spread is not
		// checked pod by pod here, which would refuse a zone's second pod
		// before the others had their first.
		per := g.remaining / len(zs)
		free := *g.variants[0]
		free.spreads = nil
		for _, z := range zs {
			var zk []int
			for _, k := range ks {
				if kindZone[k] == z {
					zk = append(zk, k)
				}
			}
			if per > 0 && len(zk) > 0 {
				shapes = append(shapes, lpbound.Shape{Request: request, Kinds: zk})
				rs = append(rs, &roundShape{g: g, pc: &free, zone: z, left: per})
			}
		}
	}
	if len(shapes) == 0 {
		return true
	}
	shapes, seed := narrowKinds(kinds, shapes)
	for dive := 0; dive < maxDives; dive++ {
		open := false
		for i, r := range rs {
			shapes[i].Count = float64(r.count())
			open = open || r.count() > 0
		}
		if !open {
			return true
		}
		res, err := lpbound.Patterns(kinds, shapes, nil, lpbound.PatternOptions{KnapsackNodes: knapsackNodes, TotalKnapsackNodes: totalKnapsackNodes, GiveUpAfter: giveUpAfter, MaxRounds: patternRounds, Tolerance: 1e-3, Seed: seed})
		if err != nil || len(res.Patterns) == 0 {
			return true // the greedy pass still places everything
		}
		seed = res.Patterns
		opened := 0
		best, bestUse := -1, 0.0
		for _, i := range s.overflowOrder(p, res.Patterns, kinds, kindType, rs) {
			pat := res.Patterns[i]
			whole := int(math.Floor(res.Use[i] + 1e-9))
			for range whole {
				if !s.openPattern(p, kindType[pat.Kind], kindZone[pat.Kind], pat, rs, false) {
					return false
				}
				opened++
			}
			if frac := res.Use[i] - float64(whole); frac > 1e-9 && frac > bestUse {
				best, bestUse = i, frac
			}
		}
		if opened == 0 {
			// Round the most used fractional pattern up: one node of it,
			// with what room its own pods leave filled by the rest.
			// Finishing sizes the node down to what it then holds.
			if best < 0 || !s.openPattern(p, kindType[res.Patterns[best].Kind], kindZone[res.Patterns[best].Kind], res.Patterns[best], rs, true) {
				return false // only the limits stop a plan that still needs nodes
			}
		}
	}
	return true
}

const (
	// maxDives bounds the rounding's re-plans. The first places the bulk;
	// later ones each place at least a node's worth of what is left.
	maxDives = 64
	// The pattern generation of one plan is bounded by work, not by the
	// clock: branch-and-bound nodes per pricing problem and in all, rounds,
	// and how many kinds in a row may fail before a round gives up. The
	// figures trade a little bound (the master stays within about 0.3% of
	// the configuration LP on the offline baseline) for plans of 10,000
	// pods in about a second.
	knapsackNodes      = 2000
	totalKnapsackNodes = 500000
	patternRounds      = 60
	giveUpAfter        = 24
)

// overflowOrder is the order in which to open patterns in p. Without limits
// it does not matter. With them, the pods that do not fit go to their next
// pool, so the limited capacity should go to the patterns that save most
// against that: what their pods would cost in the next pool (each pod's
// share of its most price-efficient type there) less the pattern's own
// price, per share of p's limits one of its nodes takes. Pods with no next
// pool count as priceless, so their patterns come first.
func (s *solver) overflowOrder(p *pool, pats []lpbound.Pattern, kinds []lpbound.Kind, kindType []*itype, rs []*roundShape) []int {
	order := make([]int, len(pats))
	for i := range order {
		order[i] = i
	}
	if len(p.limits) == 0 {
		return order
	}
	alt := make([]float64, len(rs))
	for i, r := range rs {
		alt[i] = s.overflowValue(r.g, p)
	}
	score := make([]float64, len(pats))
	for i, pat := range pats {
		t := kindType[pat.Kind]
		saved := -kinds[pat.Kind].Price
		for si, n := range pat.Counts {
			saved += float64(n) * alt[si]
		}
		score[i] = saved / max(p.limitShare(t), 1e-12)
	}
	sort.SliceStable(order, func(a, b int) bool { return score[order[a]] > score[order[b]] })
	return order
}

// overflowValue is what one pod of g costs in the first pool after p that
// it may use, at its share of that pool's most price-efficient type; 1e6
// when there is none.
func (s *solver) overflowValue(g *podGroup, p *pool) float64 {
	after := false
	for _, q := range s.pools {
		if q == p {
			after = true
			continue
		}
		if !after || q.err != nil || !s.groupPoolCompatible(g, q) {
			continue
		}
		if v := s.poolValue(g, q); !math.IsInf(v, 1) {
			return v
		}
	}
	return 1e6
}

// roundShape is one shape of the rounding: a group's pods, or for a group
// spread over zones its share in one zone, with the constraints its pods
// are checked against.
type roundShape struct {
	g    *podGroup
	pc   *podConstraints
	zone string
	// left is how many of the zone's share are still to place; -1 for a
	// shape that is the whole group.
	left int
}

func (r *roundShape) count() int {
	if r.left < 0 {
		return r.g.remaining
	}
	return min(r.left, r.g.remaining)
}

// openPattern opens one node of type t, in zone when it is set, holding
// pattern's pods, fewer where fewer are left, then, with fill, every other
// pod that fits. It reports false when the pool's limits stop it.
func (s *solver) openPattern(p *pool, t *itype, zone string, pat lpbound.Pattern, rs []*roundShape, fill bool) bool {
	if !p.withinLimits(t.cap) {
		return false
	}
	if limit, ok := p.limits["nodes"]; ok && p.acct.nodes+1 > limit.Value() {
		return false
	}
	n := s.newNode(p, t)
	if zone != "" {
		n.requirements[corev1.LabelTopologyZone] = requirements.In(corev1.LabelTopologyZone, zone)
	}
	placed := false
	put := func(r *roundShape, most int) {
		for q := most; q > 0 && r.count() > 0; q-- {
			if s.check(r.g, r.pc, n) != nil {
				return
			}
			if !placed {
				n.name = p.name + "-" + itoa(len(s.virtual)+1)
				s.virtual = append(s.virtual, n)
				p.charge(t.cap, resources.Resources{}, 1)
				placed = true
			}
			s.commit(r.g, r.pc, n, r.g.pods[len(r.g.pods)-r.g.remaining])
			if r.left > 0 {
				r.left--
			}
		}
	}
	for i, count := range pat.Counts {
		put(rs[i], count)
	}
	if placed && fill {
		for _, r := range rs {
			if r.zone == "" || r.zone == zone {
				put(r, math.MaxInt)
			}
		}
	}
	return true
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
	if len(g.variants) != 2 || len(g.inverseAnti) > 0 || len(g.ownedAnti) > 0 {
		return false
	}
	pc := g.variants[0]
	if len(pc.affinity) > 0 || len(pc.antiAffinity) > 0 {
		return false
	}
	if (len(pc.spreads) > 0 || len(g.matchedBy) > 0) && s.spreadZones(g) == nil {
		return false
	}
	return s.groupPoolCompatible(g, p)
}

// spreadZones is, for a group whose one topology constraint is a zone
// spread of maxSkew 1 among its own pods, none of them placed yet and no
// other group's pods counted with them, the zones the spread counts,
// sorted; nil for any other group. Such a group rounds per zone.
func (s *solver) spreadZones(g *podGroup) []string {
	pc := g.variants[0]
	if len(pc.spreads) != 1 || len(g.matchedBy) != 1 || g.matchedBy[0] != pc.spreads[0] {
		return nil
	}
	tg := pc.spreads[0]
	if tg.key != corev1.LabelTopologyZone || tg.maxSkew != 1 || tg.minDomains > 0 {
		return nil
	}
	for _, c := range tg.counts {
		if c > 0 {
			return nil
		}
	}
	for _, other := range s.groups {
		if other != g && slices.Contains(other.matchedBy, tg) {
			return nil
		}
	}
	var zs []string
	for z := range s.eligibleDomains(tg) {
		zs = append(zs, z)
	}
	sort.Strings(zs)
	return zs
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
