package lpbound

import (
	"math"
	"slices"
)

// price adds up to PerRound improving patterns, the most improving first.
// rho bounds, over every kind, what one node could be worth under the
// current duals divided by its price; it is +Inf when pricing stopped early
// because it had found enough.
func (g *patternGen) price() (added int, rho float64) {
	u := g.master.u
	// value of one pod of each shape, in units of p0
	val := make([]float64, len(g.shapes))
	for si, r := range g.rows {
		if r >= 0 {
			val[si] = max(u[r], 0) / g.count[si]
		}
	}
	type cand struct {
		k    int
		gain float64
		z    []int
	}
	// Partial pricing: kinds in order of how much their fractional bound
	// promises, stopping once a round's worth of patterns is found. Only
	// the last round, which finds none, has to price every kind.
	type promise struct {
		k     int
		cost  float64
		ratio float64
		ks    *knapsack
	}
	rho = 1
	var todo []promise
	for _, k := range g.live {
		cost := g.kinds[k].Price / g.p0
		for _, lu := range g.limOf[k] {
			cost -= u[g.nrows+lu.l] * lu.use / max(g.limits[lu.l].Max, 1e-12)
		}
		ks := newKnapsack(g, k, val)
		if ks == nil {
			continue
		}
		// Most kinds fail the cheap bound; only the rest get the
		// surrogates the search needs.
		up := ks.quickUpper() / cost
		if up > 1+g.opt.Tolerance {
			ks.prepare()
			up = min(up, ks.upper()/cost)
		}
		if up > 1+g.opt.Tolerance {
			todo = append(todo, promise{k, cost, up, ks})
		} else {
			rho = max(rho, up)
		}
	}
	slices.SortStableFunc(todo, func(a, b promise) int { return greater(a.ratio, b.ratio) })
	var found []cand
	failed := 0
	for _, t := range todo {
		if len(found) >= g.opt.PerRound || (g.opt.GiveUpAfter > 0 && failed >= g.opt.GiveUpAfter) {
			rho = math.Inf(1)
			break
		}
		budget := g.opt.KnapsackNodes
		if g.opt.TotalKnapsackNodes > 0 {
			budget = min(budget, g.opt.TotalKnapsackNodes-g.spent)
			if budget <= 0 {
				rho = math.Inf(1)
				break
			}
		}
		floor := t.cost * (1 + g.opt.Tolerance)
		z, v, exact := t.ks.solve(floor, budget)
		g.spent += t.ks.nodes
		proved := 1 + g.opt.Tolerance // what the search proved, over cost
		if !exact && g.opt.Knapsack != nil {
			gap := g.opt.Tolerance / 4
			if oz, ov, ok := g.oracle(t.ks, gap); ok {
				exact = true
				proved = max(ov, floor) * (1 + gap) / t.cost
				if ov > v {
					z, v = oz, ov
				}
			}
		}
		failed++
		switch {
		case z != nil && v > floor:
			failed = 0
			found = append(found, cand{t.k, (v - t.cost) / t.cost, z})
			rho = max(rho, t.ratio)
		case exact:
			rho = max(rho, proved)
		default:
			rho = max(rho, t.ratio)
		}
	}
	slices.SortStableFunc(found, func(a, b cand) int { return greater(a.gain, b.gain) })
	for _, c := range found {
		if added >= g.opt.PerRound {
			break
		}
		if g.add(Pattern{Kind: c.k, Counts: c.z}) {
			added++
		}
	}
	return added, rho
}

// oracle asks PatternOptions.Knapsack for a near-optimum of ks: its
// contents by shape and value. Values are scaled so the largest is 1, which
// keeps a MIP solver's tolerances meaningful. ok is false when the oracle
// fails or answers something that does not fit.
func (g *patternGen) oracle(ks *knapsack, gap float64) (counts []int, v float64, ok bool) {
	top := 0.0
	for _, it := range ks.items {
		top = max(top, it.v)
	}
	items := make([]KnapsackItem, len(ks.items))
	for i, it := range ks.items {
		items[i] = KnapsackItem{Value: it.v / top, Request: it.req, Max: it.ub}
	}
	z, err := g.opt.Knapsack(ks.cap, items, gap)
	if err != nil || len(z) != len(items) {
		return nil, 0, false
	}
	counts = make([]int, len(g.shapes))
	rem := append([]float64(nil), ks.cap...)
	for i, it := range ks.items {
		if z[i] < 0 || z[i] > it.ub {
			return nil, 0, false
		}
		counts[it.shape] = z[i]
		v += float64(z[i]) * it.v
		for r, q := range it.req {
			rem[r] -= float64(z[i]) * q
		}
	}
	for _, x := range rem {
		if x < -1e-6 {
			return nil, 0, false
		}
	}
	return counts, v, true
}
