package scheduling

import (
	"fmt"
	"math"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/lpbound"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	corev1 "k8s.io/api/core/v1"
)

// LowerBound is the LP relaxation's optimum for the snapshot's pods: every
// (NodePool, instance type) pair is a kind priced at its cheapest offering
// the pool allows; pods of one shape may use the kinds they fit and may run
// on. Topology constraints are relaxed away, so the bound holds for them too.
func LowerBound(snap Snapshot) (float64, error) {
	s := newSolver(snap, Options{})
	s.buildGroups(snap)
	kinds, kindOf := s.kinds()
	var shapes []lpbound.Shape
	for _, g := range s.groups {
		if g.err != nil {
			continue
		}
		sh := lpbound.Shape{Name: fmt.Sprint(g.id), Count: float64(len(g.pods)),
			Request: BoundVector(g.requests)}
		for _, p := range s.pools {
			if !s.groupPoolCompatible(g, p) {
				continue
			}
			for _, t := range p.types {
				if s.groupTypeCompatible(g, p, t) && g.requests.Fits(t.free) {
					sh.Kinds = append(sh.Kinds, kindOf[t])
				}
			}
		}
		shapes = append(shapes, sh)
	}
	res, err := lpbound.Bound(kinds, shapes)
	if err != nil {
		return 0, err
	}
	return res.Cost, nil
}

// NodeKinds are the nodes LowerBound may buy: every (NodePool, instance
// type) pair at its cheapest offering the pool allows, with the room its
// DaemonSets leave, as BoundVector counts it.
func NodeKinds(snap Snapshot) []lpbound.Kind {
	kinds, _ := newSolver(snap, Options{}).kinds()
	return kinds
}

func (s *solver) kinds() ([]lpbound.Kind, map[*itype]int) {
	var kinds []lpbound.Kind
	kindOf := map[*itype]int{}
	for _, p := range s.pools {
		for _, t := range p.types {
			kindOf[t] = len(kinds)
			kinds = append(kinds, lpbound.Kind{Name: p.name + "/" + t.it.Name, Price: t.price, Capacity: BoundVector(t.free)})
		}
	}
	return kinds, kindOf
}

// BoundVector is the part of a resource vector the lower bounds count:
// cpu (millicores), memory (bytes) and pods. Leaving a resource out only
// lowers a bound.
func BoundVector(r resources.Resources) []float64 {
	return []float64{float64(r.CPU), float64(r.Memory), float64(r.Pods)}
}

// Packing is a snapshot's pending pods as a packing problem for the
// offline integer baseline: node kinds with prices and the capacity left
// after DaemonSets, pod shapes with the kinds each may use, and the pools'
// limits. It keeps the rules a plan must follow and that a packing can
// express, so a plan can be graded against the best packing that follows
// them too:
//
//   - a shape may use the kinds of its highest-weight compatible NodePool;
//     when that pool has limits, the next compatible pools as well (a
//     packing may then choose the overflow freely, which can only lower
//     the baseline);
//   - a shape whose pods spread across zones (maxSkew 1) is split into one
//     shape per zone of count/zones pods and a shape of the remainder in
//     any zone, and kinds are then per zone, priced at that zone's
//     cheapest allowed offering;
//   - hostname anti-affinity or spread among a shape's own pods caps its
//     pods per node (Shape.PerNode).
//
// Other pod affinity, spread on other keys, host ports and volume limits
// are left out. Resources are cpu (millicores), memory (bytes), pods and
// ephemeral storage (bytes).
type Packing struct {
	Kinds    []lpbound.Kind
	KindInfo []PackingKind
	Shapes   []lpbound.Shape
	Limits   []lpbound.Limit
	// ShapeOf names each pod's shape: the shape's Name, or for a shape
	// split by zone the Name without its "/zone" suffix.
	ShapeOf map[*corev1.Pod]string
}

// PackingKind says what a kind is.
type PackingKind struct {
	NodePool, InstanceType, Zone string
}

// PackingModel builds the snapshot's Packing.
func PackingModel(snap Snapshot) Packing {
	s := newSolver(snap, Options{})
	s.buildGroups(snap)
	out := Packing{ShapeOf: map[*corev1.Pod]string{}}
	zoned := false
	for _, g := range s.groups {
		zoned = zoned || (g.err == nil && spreadsOverZones(g))
	}
	type kindKey struct {
		t    *itype
		zone string
	}
	kindOf := map[kindKey]int{}
	poolKinds := map[*pool][]int{}
	var kindTypes []*itype // the type of each kind
	for _, p := range s.pools {
		if p.err != nil {
			continue
		}
		for _, t := range p.types {
			zones := []string{""}
			if zoned {
				zones = t.reqs[corev1.LabelTopologyZone].Values()
			}
			for _, z := range zones {
				price := t.price
				if z != "" {
					price = zonePrice(t, z)
					if math.IsInf(price, 1) {
						continue
					}
				}
				kindOf[kindKey{t, z}] = len(out.Kinds)
				poolKinds[p] = append(poolKinds[p], len(out.Kinds))
				kindTypes = append(kindTypes, t)
				out.Kinds = append(out.Kinds, lpbound.Kind{Name: p.name + "/" + t.it.Name + "/" + z, Price: price, Capacity: lpVector(t.free)})
				out.KindInfo = append(out.KindInfo, PackingKind{NodePool: p.name, InstanceType: t.it.Name, Zone: z})
			}
		}
		for name, q := range p.limits {
			use := func(t *itype) float64 {
				switch name {
				case corev1.ResourceCPU:
					return float64(t.cap.CPU)
				case corev1.ResourceMemory:
					return float64(t.cap.Memory)
				case "nodes":
					return 1
				case spendcap.Resource:
					return float64(t.cap.Of(spendcap.Resource))
				}
				return 0
			}
			var max float64
			switch name {
			case corev1.ResourceCPU:
				max = float64(q.MilliValue() - p.acct.usage.CPU)
			case corev1.ResourceMemory:
				max = float64(q.Value() - p.acct.usage.Memory)
			case "nodes":
				max = float64(q.Value() - p.acct.nodes)
			case spendcap.Resource:
				max = float64(q.Value() - p.acct.usage.Of(spendcap.Resource))
			default:
				continue
			}
			l := lpbound.Limit{Name: p.name + "/" + string(name), Max: math.Max(max, 0)}
			for _, k := range poolKinds[p] {
				l.Kinds = append(l.Kinds, k)
				l.Use = append(l.Use, use(kindTypes[k]))
			}
			out.Limits = append(out.Limits, l)
		}
	}
	for _, g := range s.groups {
		if g.err != nil {
			continue
		}
		var kinds []int
		for _, p := range s.pools {
			if p.err != nil || !s.groupPoolCompatible(g, p) {
				continue
			}
			for _, t := range p.types {
				if !s.groupTypeCompatible(g, p, t) || !g.requests.Fits(t.free) {
					continue
				}
				for _, z := range t.reqs[corev1.LabelTopologyZone].Values() {
					if k, ok := kindOf[kindKey{t, z}]; ok && zoneAllowed(g, z) {
						kinds = append(kinds, k)
					}
				}
				if k, ok := kindOf[kindKey{t, ""}]; ok {
					kinds = append(kinds, k)
				}
			}
			if len(p.limits) == 0 && len(kinds) > 0 {
				break // weights: lower pools only take overflow
			}
		}
		base := lpbound.Shape{Name: fmt.Sprint(g.id), Count: float64(len(g.pods)), Request: lpVector(g.requests), Kinds: kinds, PerNode: int(g.perNodeLimit)}
		for _, pod := range g.pods {
			out.ShapeOf[pod] = base.Name
		}
		if !spreadsOverZones(g) {
			out.Shapes = append(out.Shapes, base)
			continue
		}
		byZone := map[string][]int{}
		for _, k := range kinds {
			byZone[out.KindInfo[k].Zone] = append(byZone[out.KindInfo[k].Zone], k)
		}
		var zones []string
		for z := range byZone {
			zones = append(zones, z)
		}
		sort.Strings(zones)
		// floor(n/zones) pods per zone, and the remainder in any zone: a
		// relaxation of maxSkew 1 (the remainder may share a zone), so the
		// baseline can only be lower than what a plan can reach.
		n := len(g.pods)
		for _, z := range zones {
			sh := base
			sh.Name = base.Name + "/" + z
			sh.Kinds = byZone[z]
			sh.Count = float64(n / len(zones))
			out.Shapes = append(out.Shapes, sh)
		}
		if n%len(zones) > 0 {
			sh := base
			sh.Name = base.Name + "/rest"
			sh.Count = float64(n % len(zones))
			out.Shapes = append(out.Shapes, sh)
		}
	}
	return out
}

// spreadsOverZones reports whether a group spreads its own pods across zones.
func spreadsOverZones(g *podGroup) bool {
	for _, tg := range g.variants[0].spreads {
		if tg.key == corev1.LabelTopologyZone && tg.maxSkew <= 1 {
			return true
		}
	}
	return false
}

// zoneAllowed reports whether the group's node requirements allow zone z.
func zoneAllowed(g *podGroup, z string) bool {
	r, ok := g.variants[0].nodeReqs[corev1.LabelTopologyZone]
	return !ok || r.Has(z)
}

// zonePrice is t's cheapest offering in zone z that its pool allows.
func zonePrice(t *itype, z string) float64 {
	best := math.Inf(1)
	for _, o := range t.it.Offerings {
		if o.Zone == z && o.Available && t.reqs[v1.LabelCapacityType].Has(o.CapacityType) {
			best = math.Min(best, o.Price)
		}
	}
	return best
}
