package disruption

import (
	"sync/atomic"

	"github.com/joiner-autoscaler/joiner/pkg/lpbound"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// setBound bounds from below what any plan of a repack set's pods can cost
// in new nodes: the cheapest fractional nodes, of any type of any pool at
// its cheapest offering the pool allows (scheduling.NodeKinds), whose summed room covers the pods' summed
// requests. No plan pays less, so a set whose price less this bound does
// not beat the best saving found so far cannot be chosen, and is not
// planned: planning a set costs tens to hundreds of milliseconds of
// pattern generation, the bound well under one.
type setBound struct {
	kinds []lpbound.Kind
	// free is, by node, the room its pods leave: what the plan with other
	// nodes' room can put there at most.
	free map[string]resources.Resources
}

// pruneRepack is off only in the test that checks pruning changes no
// decision: every set is then planned, every way.
var pruneRepack = true

// repackPlans counts the plans repack makes, for that test.
var repackPlans atomic.Int64

func newSetBound(snap scheduling.Snapshot) *setBound {
	b := &setBound{free: map[string]resources.Resources{}, kinds: scheduling.NodeKinds(snap)}
	for _, n := range snap.Nodes {
		used := resources.Resources{}
		for _, p := range n.Pods {
			used = used.Add(resources.PodRequests(p))
		}
		b.free[n.Name] = resources.FromResourceList(n.Allocatable).Sub(used).NonNegative()
	}
	return b
}

// cost is the bound for pods needing demand, $/h; 0 when it cannot be
// worked out, which prunes nothing.
func (b *setBound) cost(demand resources.Resources) float64 {
	d := scheduling.BoundVector(demand.NonNegative())
	if d[0] <= 0 && d[1] <= 0 && d[2] <= 0 {
		return 0
	}
	// One shape of many tiny pods: the relaxation splits pods anyway, and
	// a shape must fit a kind to use it.
	const n = 1 << 20
	req := make([]float64, len(d))
	for i, x := range d {
		req[i] = x / n
	}
	all := make([]int, len(b.kinds))
	for i := range all {
		all[i] = i
	}
	res, err := lpbound.Bound(b.kinds, []lpbound.Shape{{Name: "set", Count: n, Request: req, Kinds: all}})
	if err != nil {
		return 0
	}
	// A margin for the LP's arithmetic: the bound must never exceed a
	// plan's price.
	return max(0, res.Cost*(1-1e-6)-1e-6)
}

// demand is what the set's moving pods request.
func setDemand(set []scored) resources.Resources {
	var d resources.Resources
	for _, s := range set {
		for _, p := range s.pods {
			d = d.Add(resources.PodRequests(p))
		}
	}
	return d
}

// room is the room on the nodes outside the set.
func (b *setBound) room(in map[string]bool) resources.Resources {
	var r resources.Resources
	for name, f := range b.free {
		if !in[name] {
			r = r.Add(f)
		}
	}
	return r
}
