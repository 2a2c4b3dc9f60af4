package lpbound

import (
	"math"
	"slices"
)

// pruneDominated removes kinds that another kind beats on every count that
// matters to the LP.
//
// In the relaxation a kind is only a set of per-unit prices: y_k scales
// freely, so one node of kind k carrying load L costs price_k·max_r
// L_r/cap_kr. If kind j may run every shape that k may run, and for every
// resource those shapes request price_j/cap_jr ≤ price_k/cap_kr, then moving
// k's load to j never costs more, and k can go without changing the optimum.
// Catalogues have 1,000+ kinds but far fewer on this Pareto front (from a
// dozen to ~160 of ~1,400 on the synthetic catalogue in the tests, more
// with more shapes and resources), and every survivor is priced in each round of column
// generation, so this keeps those rounds cheap. Pruning is not needed for
// correctness: the solver gives the same optimum without it, only slower.
//
// Resources that no shape of k requests are ignored for k: load there is
// zero whichever kind carries it. That lets a kind without GPUs be
// dominated by one with them when no GPU pod may use either.
//
// Two kinds with identical allowed shapes and per-unit prices dominate each
// other; the one with the lower index is kept, which keeps the relation a
// strict order so that every removed kind has a surviving dominator.
func (p *problem) pruneDominated() {
	nk := len(p.kinds)
	if nk < 2 {
		return
	}
	words := (len(p.shapes) + 63) / 64
	bits := make([]uint64, nk*words)
	unit := make([]float64, nk*p.nres) // price/cap, +Inf when cap is 0
	rel := make([][]int, nk)           // resources some allowed shape requests
	for ki, k := range p.kinds {
		for _, s := range k.shapes {
			bits[ki*words+s/64] |= 1 << (s % 64)
		}
		for r := 0; r < p.nres; r++ {
			u := math.Inf(1)
			if k.cap[r] > 0 {
				u = k.price / k.cap[r]
			}
			unit[ki*p.nres+r] = u
			for _, s := range k.shapes {
				if p.shapes[s].req[r] > 0 {
					rel[ki] = append(rel[ki], r)
					break
				}
			}
		}
	}

	// weak reports whether j is at least as good as k for everything k does.
	weak := func(j, k int) bool {
		uj, uk := unit[j*p.nres:(j+1)*p.nres], unit[k*p.nres:(k+1)*p.nres]
		for _, r := range rel[k] {
			if uj[r] > uk[r] {
				return false
			}
		}
		bj, bk := bits[j*words:(j+1)*words], bits[k*words:(k+1)*words]
		for w := range bk {
			if bk[w]&^bj[w] != 0 {
				return false
			}
		}
		return true
	}

	// Visit kinds so that every dominator comes before what it dominates:
	// more allowed shapes first (a dominator allows a superset), then a
	// lower weighted sum of unit prices over the kind's own resources (a
	// dominator with the same shapes is no worse on each), then index (the
	// tie-break). A kind then only needs checking against the undominated
	// kinds seen so far, which are few, instead of against all kinds. If
	// rounding in the sums ever misorders two kinds, the cost is only that
	// a dominated kind survives; nothing is removed without a surviving
	// dominator.
	// Weights put resources in comparable units; any positive ones would
	// do. Unit prices are positive and finite wherever they are summed.
	weight := make([]float64, p.nres)
	for r := range weight {
		least := math.Inf(1)
		for ki := range nk {
			least = min(least, unit[ki*p.nres+r])
		}
		if least > 0 && !math.IsInf(least, 1) {
			weight[r] = 1 / least
		}
	}
	nshapes := make([]int, nk)
	score := make([]float64, nk)
	for ki, k := range p.kinds {
		nshapes[ki] = len(k.shapes)
		for _, r := range rel[ki] {
			score[ki] += unit[ki*p.nres+r] * weight[r]
		}
	}
	order := make([]int, nk)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if nshapes[a] != nshapes[b] {
			return nshapes[b] - nshapes[a]
		}
		if score[a] != score[b] {
			if score[a] < score[b] {
				return -1
			}
			return 1
		}
		return a - b
	})

	keep := make([]bool, nk)
	var front []int
	for _, k := range order {
		dominated := false
		for _, j := range front {
			if weak(j, k) && (j < k || !weak(k, j)) {
				dominated = true
				break
			}
		}
		if !dominated {
			keep[k] = true
			front = append(front, k)
		}
	}

	kept := p.kinds[:0]
	for ki, k := range p.kinds {
		if keep[ki] {
			kept = append(kept, k)
		}
	}
	p.kinds = kept
}

// reduceRows decides which capacity rows each kind needs in the LP.
//
// A row is pointless when no allowed shape requests that resource, and
// redundant when another row of the same kind is at least as tight for every
// allowed shape (req_sr/cap_kr ≤ req_sr'/cap_kr' for all s): then row r' being
// satisfied implies row r is. The typical case is pod slots on a large node
// running small pods, which binds before cpu does. Every row removed shrinks
// the master's basis (quadratic cost per pivot) and the pricing LPs.
// Identical rows keep the lower resource index, for the same reason as in
// pruneDominated.
func (p *problem) reduceRows() {
	for ki := range p.kinds {
		k := &p.kinds[ki]
		var cand []int
		for r := 0; r < p.nres; r++ {
			for _, s := range k.shapes {
				if p.shapes[s].req[r] > 0 {
					cand = append(cand, r)
					break
				}
			}
		}
		// ratio[i][j] is req/cap for candidate row i and the j-th allowed shape.
		ratio := make([][]float64, len(cand))
		for i, r := range cand {
			ratio[i] = make([]float64, len(k.shapes))
			for j, s := range k.shapes {
				ratio[i][j] = p.shapes[s].req[r] / k.cap[r]
			}
		}
		atMost := func(a, b []float64) bool {
			for j := range a {
				if a[j] > b[j] {
					return false
				}
			}
			return true
		}
		k.rows = k.rows[:0]
		for i, r := range cand {
			redundant := false
			for i2 := range cand {
				if i2 == i || !atMost(ratio[i], ratio[i2]) {
					continue
				}
				if i2 < i || !atMost(ratio[i2], ratio[i]) {
					redundant = true
					break
				}
			}
			if !redundant {
				k.rows = append(k.rows, r)
			}
		}
	}
}
