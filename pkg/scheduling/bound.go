package scheduling

import (
	"fmt"

	"github.com/joiner-autoscaler/joiner/pkg/lpbound"
)

// LowerBound is the LP relaxation's optimum for the snapshot's pods: every
// (NodePool, instance type) pair is a kind priced at its cheapest offering
// the pool allows; pods of one shape may use the kinds they fit and may run
// on. Topology constraints are relaxed away, so the bound holds for them too.
func LowerBound(snap Snapshot) (float64, error) {
	s := &solver{opts: Options{}.withDefaults(), topo: newTopology(), plan: &Plan{Existing: map[string]string{}}}
	s.knownKeys = knownLabelKeys(snap.NodePools)
	s.buildNamespaces(snap)
	s.buildPools(snap)
	s.buildGroups(snap)
	var kinds []lpbound.Kind
	kindOf := map[*itype]int{}
	for _, p := range s.pools {
		for _, t := range p.types {
			free := t.free
			kindOf[t] = len(kinds)
			kinds = append(kinds, lpbound.Kind{Name: p.name + "/" + t.it.Name, Price: t.price,
				Capacity: []float64{float64(free.CPU), float64(free.Memory), float64(free.Pods)}})
		}
	}
	var shapes []lpbound.Shape
	for _, g := range s.groups {
		if g.err != nil {
			continue
		}
		sh := lpbound.Shape{Name: fmt.Sprint(g.id), Count: float64(len(g.pods)),
			Request: []float64{float64(g.requests.CPU), float64(g.requests.Memory), float64(g.requests.Pods)}}
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
