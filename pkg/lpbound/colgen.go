package lpbound

import (
	"fmt"
	"math"
	"slices"
)

// The LP is solved by column generation over kinds. The master is the LP
// of Bound's comment restricted to a few "active" kinds; the rest are
// priced with the master's shape duals u and activated only if they could
// lower the cost.
//
// Pricing a kind asks what one node of it is worth under u: the most
// valuable configuration solves the small LP
//
//	max Σ_s u_s·z_s  s.t.  Σ_s z_s·req_sr ≤ cap_kr for every r, z ≥ 0,
//
// with one row per resource. If that value is at most the kind's price, no
// use of the kind can improve the master; when this holds for every kind,
// u is a feasible dual of the full LP and the master optimum is the LP
// optimum.
//
// Why kinds and not configurations (Gilmore-Gomory): both were measured on
// the synthetic catalogue in the tests. Generating configurations keeps the
// master at one row per shape but needs one round per improvement of a
// single node's contents; with 300 shapes that took 140-280 rounds and
// 3-7 s. An activated kind brings all of its configurations at once, and
// only a handful of kinds are ever worth activating.
//
// Why not the whole pruned LP: after pruning ~100-150 kinds are left, that
// is 300-500 capacity rows, and the simplex is quadratic per pivot and
// cubic per refactorisation in the row count.

const (
	// maxRounds caps pricing rounds. Every round activates a kind, so the
	// number of kinds bounds it anyway; the cap only guards against a bug.
	maxRounds = 10000
	// maxActivate is how many kinds one round may activate. More means
	// fewer rounds but a larger master, and most candidates of an early
	// round stop being attractive once the best few are in.
	maxActivate = 8
	// priceTol is the relative margin by which a node must be worth more
	// than its price to be activated. It is looser than the master's optTol
	// so that a kind the master has just priced out is not reactivated.
	priceTol = 1e-9
	// certTol is how far the primal objective may sit above the dual bound
	// certified at the end before the result is rejected.
	certTol = 1e-6
)

// colgen holds the restricted master and the data pricing needs.
//
// Units are chosen so that every number the simplex compares with an
// absolute tolerance is a share of the total cost, whatever the prices,
// pod counts and resource units. Let alone_s be the cost of shape s alone
// on the kind cheapest for it, and p0 = Σ_s alone_s. Then y_k is the money
// spent on kind k in units of p0 (each y column costs exactly 1), x_sk is
// the fraction of shape s placed on k times alone_s/p0 (so shape row s has
// right-hand side alone_s/p0), and capacity row k,r reads
//
//	Σ_s x_sk·count_s·(req_sr/cap_kr)·price_k/alone_s ≤ y_k,
//
// whose coefficients compare what s would cost on k, were r the only
// resource, with what it costs alone: near one. The shape duals are then
// near one too, so a reduced-cost tolerance of 1e-11 is a relative error
// for a shape of one pod as much as for one of a million. Scaling rows by
// pod counts instead was tried and failed exactly there: the duals of
// single-pod shapes next to million-pod ones drowned in the tolerance,
// and the certified bound fell 6% short of the primal.
type colgen struct {
	p     *problem
	p0    float64     // $/h of the starting solution, > 0
	alone []float64   // alone_s, $/h
	coef  [][]float64 // coef[k][j*len(rows)+ri] = req/cap for kinds[k].shapes[j], rows[ri]

	master *rsimplex
	yCol   []int   // master column of y_k, -1 while kind k is inactive
	xCol   [][]int // master column of x for kinds[k].shapes[j]
	slack  [][]int // master column of the slack of each capacity row of k

	rounds int // pricing rounds, for tests and diagnostics

	// assign is x of the optimum in pods, by problem shape and kind index.
	assign []Assignment
}

// solve returns y_k, in nodes, for each kind of p.
func (p *problem) solve() ([]float64, []Assignment, stats, error) {
	g := &colgen{p: p}
	y, err := g.run()
	st := stats{rounds: g.rounds, pivots: 0}
	if g.master != nil {
		st.pivots = g.master.iters
	}
	for _, c := range g.yCol {
		if c >= 0 {
			st.active++
		}
	}
	return y, g.assign, st, err
}

// stats describes how a solve went. Tests use it to make sure the pricing
// path is exercised; it does not affect results.
type stats struct {
	rounds int // pricing rounds
	active int // kinds that entered the master
	pivots int // simplex pivots in the master
}

func (g *colgen) run() ([]float64, error) {
	p := g.p
	g.coef = make([][]float64, len(p.kinds))
	for ki, k := range p.kinds {
		nr := len(k.rows)
		cf := make([]float64, len(k.shapes)*nr)
		for j, s := range k.shapes {
			for ri, r := range k.rows {
				cf[j*nr+ri] = p.shapes[s].req[r] / k.cap[r]
			}
		}
		g.coef[ki] = cf
	}
	g.yCol = make([]int, len(p.kinds))
	for ki := range g.yCol {
		g.yCol[ki] = -1
	}
	g.xCol = make([][]int, len(p.kinds))
	g.slack = make([][]int, len(p.kinds))

	if err := g.initMaster(); err != nil {
		return nil, err
	}
	type cand struct {
		kind  int
		value float64
	}
	var cands []cand
	for range maxRounds {
		if err := g.master.solve(); err != nil {
			return nil, err
		}
		u := make([]float64, len(p.shapes))
		for s := range u {
			// Demand can only cost, so the true duals are ≥ 0; clamping
			// what rounding made negative keeps them dual feasible.
			u[s] = max(g.master.u[s], 0)
		}
		perPod := make([]float64, len(u)) // value of one pod, in units of p0
		for s, v := range u {
			perPod[s] = v * g.alone[s] / (g.p0 * p.shapes[s].count)
		}
		ratio := 1.0
		cands = cands[:0]
		for ki := range p.kinds {
			v, err := g.priceKind(ki, perPod)
			if err != nil {
				return nil, err
			}
			ratio = max(ratio, v)
			if g.yCol[ki] < 0 && v > 1+priceTol {
				cands = append(cands, cand{ki, v})
			}
		}
		g.rounds++
		if len(cands) == 0 {
			return g.finish(u, ratio)
		}
		slices.SortFunc(cands, func(a, b cand) int {
			if a.value != b.value {
				if a.value > b.value {
					return -1
				}
				return 1
			}
			return a.kind - b.kind
		})
		basis := slices.Clone(g.master.basis)
		for _, c := range cands[:min(len(cands), maxActivate)] {
			basis = append(basis, g.activate(c.kind)...)
		}
		if err := g.master.setBasis(basis); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: column generation did not converge in %d rounds", ErrNumerical, maxRounds)
}

// activate adds kind ki's capacity rows and columns to the master and
// returns the slack columns, which extend a feasible basis to the new rows
// (the kind starts unused).
func (g *colgen) activate(ki int) []int {
	k := g.p.kinds[ki]
	nr := len(k.rows)
	rm := g.master
	base := rm.m
	rm.addRows(make([]float64, nr)...)
	yc := spCol{}
	for ri := range nr {
		yc.rows = append(yc.rows, base+ri)
		yc.vals = append(yc.vals, -1)
	}
	g.yCol[ki] = rm.addCol(yc, 1)
	g.xCol[ki] = make([]int, len(k.shapes))
	for j, s := range k.shapes {
		c := spCol{rows: []int{s}, vals: []float64{1}}
		f := g.p.shapes[s].count * k.price / g.alone[s]
		for ri := range nr {
			if a := g.coef[ki][j*nr+ri]; a > 0 {
				c.rows = append(c.rows, base+ri)
				c.vals = append(c.vals, a*f)
			}
		}
		g.xCol[ki][j] = rm.addCol(c, 0)
	}
	g.slack[ki] = make([]int, nr)
	for ri := range nr {
		g.slack[ki][ri] = rm.addCol(spCol{rows: []int{base + ri}, vals: []float64{1}}, 0)
	}
	return g.slack[ki]
}

// singleShape returns the fraction of a node of kind ki that one pod of
// its j-th shape takes, by its tightest resource.
func (g *colgen) singleShape(ki, j int) float64 {
	nr := len(g.p.kinds[ki].rows)
	worst := 0.0
	for ri := range nr {
		worst = max(worst, g.coef[ki][j*nr+ri])
	}
	return worst
}

// initMaster activates, for every shape, the kind that is cheapest for it
// alone, and starts from every shape alone on that kind: a feasible basis
// with x of those pairs, y of each used kind in place of the slack of its
// tightest row, and the other slacks.
func (g *colgen) initMaster() error {
	p := g.p
	type choice struct {
		kind, j int
		cost    float64 // $/h for all pods of the shape
	}
	best := make([]choice, len(p.shapes))
	for si := range best {
		best[si] = choice{-1, -1, math.Inf(1)}
	}
	for ki, k := range p.kinds {
		for j, si := range k.shapes {
			if c := p.shapes[si].count * k.price * g.singleShape(ki, j); c < best[si].cost {
				best[si] = choice{ki, j, c}
			}
		}
	}
	g.alone = make([]float64, len(p.shapes))
	for si, b := range best {
		if b.kind < 0 {
			// newProblem and pruning guarantee a kind per shape.
			return fmt.Errorf("lpbound: internal error: shape %q lost all kinds", p.shapes[si].name)
		}
		g.alone[si] = b.cost
		g.p0 += b.cost
	}

	g.master = newRSimplex(make([]float64, len(p.shapes)))
	for si := range p.shapes {
		g.master.b[si] = g.alone[si] / g.p0
	}
	var order []int // kinds in activation order
	for _, b := range best {
		if g.yCol[b.kind] < 0 {
			g.activate(b.kind)
			order = append(order, b.kind)
		}
	}
	basis := make([]int, 0, g.master.m)
	load := map[int][]float64{}
	for si, b := range best {
		basis = append(basis, g.xCol[b.kind][b.j])
		nr := len(p.kinds[b.kind].rows)
		if load[b.kind] == nil {
			load[b.kind] = make([]float64, nr)
		}
		for ri := range nr {
			load[b.kind][ri] += g.coef[b.kind][b.j*nr+ri] * p.shapes[si].count
		}
	}
	for _, ki := range order {
		tight := 0
		for ri, l := range load[ki] {
			if l > load[ki][tight] {
				tight = ri
			}
		}
		basis = append(basis, g.yCol[ki])
		for ri, c := range g.slack[ki] {
			if ri != tight {
				basis = append(basis, c)
			}
		}
	}
	return g.master.setBasis(basis)
}

// priceKind returns the value under perPod of one node of kind ki relative
// to its price, or an upper bound on it when the bound is at most 1.
//
// The bound comes first because it is cheap and usually decisive: with only
// one capacity row, the best use of a node is the single shape with the
// highest perPod_s/(req_sr/cap_kr), and the true value is at most the least
// of those over rows.
func (g *colgen) priceKind(ki int, perPod []float64) (float64, error) {
	k := g.p.kinds[ki]
	nr := len(k.rows)
	cf := g.coef[ki]
	scale := g.p0 / k.price
	ub := math.Inf(1)
	umax := 0.0
	for ri := range nr {
		best := 0.0
		for j, s := range k.shapes {
			v := perPod[s]
			if v <= 0 {
				continue
			}
			umax = max(umax, v)
			if a := cf[j*nr+ri]; a > 0 {
				best = max(best, v/a)
			} else {
				best = math.Inf(1)
			}
		}
		ub = min(ub, best)
	}
	if ub*scale <= 1+priceTol {
		return ub * scale, nil
	}

	// max perPod·z s.t. A z + t = 1, z, t ≥ 0, from the all-slack basis.
	// Costs are divided by their largest magnitude for the same reason as
	// the master's units.
	ones := make([]float64, nr)
	for ri := range ones {
		ones[ri] = 1
	}
	sub := newRSimplex(ones)
	basis := make([]int, nr)
	for ri := range nr {
		basis[ri] = sub.addCol(spCol{rows: []int{ri}, vals: []float64{1}}, 0)
	}
	for j, s := range k.shapes {
		if perPod[s] <= 0 {
			continue
		}
		var c spCol
		for ri := range nr {
			if a := cf[j*nr+ri]; a > 0 {
				c.rows = append(c.rows, ri)
				c.vals = append(c.vals, a)
			}
		}
		sub.addCol(c, -perPod[s]/umax)
	}
	if err := sub.setBasis(basis); err != nil {
		return 0, err
	}
	if err := sub.solve(); err != nil {
		return 0, err
	}

	return -sub.objective() * umax * scale, nil
}

// finish turns the optimal master into node counts after checking that the
// answer is what it claims to be. The point must satisfy the master's
// constraints, and its cost must match the dual bound b·u/ratio: scaling u
// down by ratio makes it exactly dual feasible for the full LP, so that
// quotient is a lower bound on the optimum however the simplex got there.
func (g *colgen) finish(u []float64, ratio float64) ([]float64, error) {
	if err := g.master.checkFeasible(); err != nil {
		return nil, err
	}
	primal := g.master.objective()
	dual := 0.0
	for si, v := range u {
		dual += v * g.master.b[si]
	}
	if lower := dual / ratio; primal-lower > certTol*primal {
		return nil, fmt.Errorf("%w: primal %g above certified bound %g", ErrNumerical, primal, lower)
	}
	y := make([]float64, len(g.p.kinds))
	for ki, k := range g.p.kinds {
		if g.yCol[ki] < 0 {
			continue
		}
		for j, si := range k.shapes {
			if c := g.xCol[ki][j]; c >= 0 {
				if frac := g.master.value(c) * g.p0 / g.alone[si]; frac > 1e-12 {
					g.assign = append(g.assign, Assignment{Shape: si, Kind: ki, Pods: frac * g.p.shapes[si].count})
				}
			}
		}
		// A basic variable that is zero up to rounding is not a node.
		if v := g.master.value(g.yCol[ki]); v > 1e-13*primal {
			y[ki] = v * g.p0 / k.price
		}
	}
	return y, nil
}
