package scheduling

import "slices"

// Solve plans the snapshot.
func Solve(snap Snapshot, opts Options) *Plan {
	s := place(snap, opts)
	s.finish()
	return s.plan
}

// place builds the solver for snap and places every pod, leaving the new
// nodes un-sized.
func place(snap Snapshot, opts Options) *solver {
	s := newSolver(snap, opts)
	s.buildGroups(snap)
	// Pods that need nodes of their own go first and lay out those nodes,
	// pulling in a fair share of the rest; LP rounding then packs the bulk
	// of what is left, and the greedy pass places the remainder.
	s.run(func(g *podGroup) bool { return g.perNodeLimit > 0 }, false)
	s.lpRound()
	s.run(func(*podGroup) bool { return true }, true)
	return s
}

// SolveWithOne is Solve, and besides it the plan of snap.Pods onto a
// single new node (the cheapest instance type that holds them all), or nil
// when none does or the pods have topology constraints that one node could
// break. Consolidation's repack asks both of every set it tries, and gets
// them for the price of one placement: unlike a plan of two or more nodes,
// one node that holds every displaced pod has room for them in whatever
// order and wherever kube-scheduler puts them.
func SolveWithOne(snap Snapshot, opts Options) (*Plan, *NewNodeClaim) {
	s := place(snap, opts)
	one := s.one()
	if one != nil {
		// finish goes on changing the nodes one was sized from.
		one.Pods = slices.Clone(one.Pods)
	}
	s.finish()
	return s.plan, one
}

// one is the single node for the placement s made; it changes nothing.
func (s *solver) one() *NewNodeClaim {
	switch {
	case len(s.plan.Unschedulable) > 0 || len(s.plan.Existing) > 0 || len(s.virtual) == 0:
		return nil
	case len(s.virtual) == 1:
		return s.rightSize(s.virtual[0], false)
	}
	return s.joinAll(s.virtual)
}

// joinAll sizes one node for the pods of all of nodes, or returns nil when
// they cannot share one (different pools, topology constraints, no type
// large enough). It changes nothing.
func (s *solver) joinAll(nodes []*node) *NewNodeClaim {
	if len(nodes) < 2 {
		return nil
	}
	joined := nodes[0]
	if !mergeable(joined) {
		return nil
	}
	for _, n := range nodes[1:] {
		if n.pool != joined.pool || !mergeable(n) {
			return nil
		}
		j, ok := s.join(joined, n)
		if !ok {
			return nil
		}
		joined = j
	}
	return s.rightSize(joined, false)
}
