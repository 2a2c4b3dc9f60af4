package lpbound

import (
	"math"
	"slices"
)

// knapsack is the pricing problem of Patterns for one kind: the most
// valuable whole-pod contents of one node, with values from the master's
// duals. It is small (one item per shape, a handful of resources) but
// integer, so it is solved by depth-first branch and bound: items in order
// of value per unit of their dominant resource, the largest count first,
// pruned by the fractional bound of each resource taken alone (each is a
// valid upper bound; the smallest is used).
type knapsack struct {
	cap   []float64
	items []kitem
	// sur are the surrogate weightings in use.
	sur []surrogate

	z, bestZ []int
	best     float64
	nodes    int
	budget   int
	cut      bool
	narrow   bool
	nshapes  int
}

// surrogate is one weighting: the weighted request of each item and the
// items that need some of it, by value per weighted unit, best first.
type surrogate struct {
	w     []float64
	req   []float64 // by item
	order []int
	// free: some item needs none of the weighted resources.
	free bool
}

type kitem struct {
	shape int
	v     float64
	req   []float64
	ub    int
}

func newKnapsack(g *patternGen, k int, val []float64) *knapsack {
	ks := &knapsack{cap: g.kinds[k].Capacity, nshapes: len(g.shapes)}
	for _, si := range g.kOK[k] {
		if g.rows[si] < 0 || val[si] <= 0 {
			continue
		}
		n := g.maxAlone(k, si)
		if n <= 0 {
			continue
		}
		ks.items = append(ks.items, kitem{shape: si, v: val[si], req: g.shapes[si].Request, ub: n})
	}
	if len(ks.items) == 0 {
		return nil
	}
	dom := func(it kitem) float64 {
		d := 0.0
		for r, q := range it.req {
			if ks.cap[r] > 0 {
				d = max(d, q/ks.cap[r])
			}
		}
		return d
	}
	slices.SortStableFunc(ks.items, func(a, b kitem) int { return greater(a.v/dom(a), b.v/dom(b)) })
	return ks
}

// quickUpper bounds the optimum by each resource alone, the cheapest of
// the bounds: pricing uses it to pass over kinds before building anything
// more.
func (ks *knapsack) quickUpper() float64 {
	ws := ks.unitWeights()
	if len(ws) == 0 {
		return ks.frac(0, ks.cap)
	}
	best := math.Inf(1)
	var s surrogate
	for _, w := range ws {
		ks.surrogateIn(w, &s)
		best = min(best, ks.surBound(s, 0, ks.cap))
	}
	return best
}

// prepare picks the weightings for the search, each resource alone and
// mixes of each pair in tenths (weights per unit of capacity), keeping the
// three that bound the root lowest, and orders the items by value per unit
// of the tightest: greedy in that order is the LP's own choice, and the
// first dive of the search follows it.
func (ks *knapsack) prepare() {
	ws := ks.unitWeights()
	var res []int // the resource of each unit weighting
	for _, w := range ws {
		for r, x := range w {
			if x > 0 {
				res = append(res, r)
				break
			}
		}
	}
	for ai, a := range res {
		for _, b := range res[ai+1:] {
			for step := 1; step < 10; step++ {
				w := make([]float64, len(ks.cap))
				w[a] = float64(step) / 10 / ks.cap[a]
				w[b] = float64(10-step) / 10 / ks.cap[b]
				ws = append(ws, w)
			}
		}
	}
	type scored struct {
		w     []float64
		bound float64
	}
	all := make([]scored, len(ws))
	var s surrogate
	for i, w := range ws {
		ks.surrogateIn(w, &s)
		all[i] = scored{w, ks.surBound(s, 0, ks.cap)}
	}
	ks.sur = ks.sur[:0]
	if len(all) == 0 {
		return // no item requests anything: frac counts them all whole
	}
	slices.SortStableFunc(all, func(a, b scored) int { return greater(b.bound, a.bound) })
	top := all[0].w
	weighted := func(it kitem) float64 {
		d := 0.0
		for r, q := range it.req {
			d += top[r] * q
		}
		return d
	}
	slices.SortStableFunc(ks.items, func(a, b kitem) int { return greater(a.v*weighted(b), b.v*weighted(a)) })
	for i := 0; i < len(all) && i < 3; i++ {
		ks.sur = append(ks.sur, ks.surrogate(all[i].w))
	}
}

// unitWeights are the weightings of each requested resource alone.
func (ks *knapsack) unitWeights() [][]float64 {
	var ws [][]float64
	for r := range ks.cap {
		if ks.cap[r] <= 0 {
			continue
		}
		for _, it := range ks.items {
			if it.req[r] > 0 {
				w := make([]float64, len(ks.cap))
				w[r] = 1 / ks.cap[r]
				ws = append(ws, w)
				break
			}
		}
	}
	return ws
}

// surrogate builds the weighting w over the items in their current order.
func (ks *knapsack) surrogate(w []float64) surrogate {
	var s surrogate
	ks.surrogateIn(w, &s)
	return s
}

// surrogateIn builds the weighting w into s, reusing its slices: the
// weightings tried only for their bound at the root need no slices of
// their own.
func (ks *knapsack) surrogateIn(w []float64, s *surrogate) {
	s.w, s.free = w, false
	s.req = slices.Grow(s.req[:0], len(ks.items))[:len(ks.items)]
	clear(s.req)
	s.order = s.order[:0]
	for i, it := range ks.items {
		for r, q := range it.req {
			s.req[i] += w[r] * q
		}
		if s.req[i] > 0 {
			s.order = append(s.order, i)
		} else {
			s.free = true
		}
	}
	slices.SortStableFunc(s.order, func(ia, ib int) int { return greater(ks.items[ia].v*s.req[ib], ks.items[ib].v*s.req[ia]) })
}

// upper bounds the knapsack's optimum from the start.
func (ks *knapsack) upper() float64 {
	return ks.frac(0, ks.cap)
}

// frac bounds the value items[from:] can add within rem: the lowest of
// the surrogate bounds.
func (ks *knapsack) frac(from int, rem []float64) float64 {
	if len(ks.sur) == 0 { // nothing requested: everything fits
		v := 0.0
		for _, it := range ks.items[from:] {
			v += float64(it.ub) * it.v
		}
		return v
	}
	best := math.Inf(1)
	for _, s := range ks.sur {
		best = min(best, ks.surBound(s, from, rem))
	}
	return best
}

// cannotBeat is whether items[from:] added to v within rem cannot beat
// the best found: v+frac(from, rem) <= best, stopping at the first
// surrogate that shows it (the first is the tightest at the root) rather
// than taking the least of them all.
func (ks *knapsack) cannotBeat(from int, rem []float64, v float64) bool {
	if len(ks.sur) == 0 {
		return v+ks.frac(from, rem) <= ks.best+1e-12
	}
	for _, s := range ks.sur {
		if v+ks.surBound(s, from, rem) <= ks.best+1e-12 {
			return true
		}
	}
	return false
}

// surBound is the fractional knapsack bound of one surrogate. Items that
// need none of the weighted resources are not limited by it and count whole.
func (ks *knapsack) surBound(s surrogate, from int, rem []float64) float64 {
	left := 0.0
	for r, w := range s.w {
		left += w * rem[r]
	}
	v := 0.0
	for _, i := range s.order {
		if left <= 0 {
			break
		}
		if i < from {
			continue
		}
		it := &ks.items[i]
		take := min(float64(it.ub), left/s.req[i])
		v += take * it.v
		left -= take * s.req[i]
	}
	if s.free {
		for i := from; i < len(ks.items); i++ {
			if s.req[i] == 0 {
				v += float64(ks.items[i].ub) * ks.items[i].v
			}
		}
	}
	return v
}

// solve returns the best contents worth more than floor, its value, and
// whether the search finished within budget nodes. z is by shape index of
// the pattern generator (length of its shapes), nil when nothing beats floor.
func (ks *knapsack) solve(floor float64, budget int) ([]int, float64, bool) {
	ks.best = floor
	ks.budget = budget
	ks.z = make([]int, len(ks.items))
	rem := append([]float64(nil), ks.cap...)
	// A narrow pass first, each count at most two below the most that
	// fits (or zero): it finds good contents within a small budget, where
	// a full depth-first search spends it on the least valuable items.
	ks.narrow = true
	ks.dfs(0, rem, 0)
	ks.narrow, ks.cut = false, false
	ks.dfs(0, rem, 0)
	if ks.bestZ == nil {
		return nil, 0, !ks.cut
	}
	return ks.bestZ, ks.best, !ks.cut
}

func (ks *knapsack) dfs(i int, rem []float64, v float64) {
	ks.nodes++
	if ks.nodes > ks.budget {
		ks.cut = true
		return
	}
	if v > ks.best+1e-12 {
		ks.best = v
		ks.record()
	}
	if i == len(ks.items) {
		return
	}
	if ks.cannotBeat(i, rem, v) {
		return
	}
	it := ks.items[i]
	n := it.ub
	for r, q := range it.req {
		if q > 0 {
			n = min(n, int(math.Floor(rem[r]/q+1e-9)))
		}
	}
	if i == len(ks.items)-1 {
		n = max(n, 0) // the last item: more is always better
		ks.z[i] = n
		if v+float64(n)*it.v > ks.best+1e-12 {
			ks.best = v + float64(n)*it.v
			ks.record()
		}
		ks.z[i] = 0
		return
	}
	for t := n; t >= 0; t-- {
		if ks.narrow && t < n-2 && t > 0 {
			t = 0
		}
		for r, q := range it.req {
			rem[r] -= float64(t) * q
		}
		ks.z[i] = t
		ks.dfs(i+1, rem, v+float64(t)*it.v)
		for r, q := range it.req {
			rem[r] += float64(t) * q
		}
		if ks.cut {
			break
		}
	}
	ks.z[i] = 0
}

// record keeps the current contents as the best, by shape index.
func (ks *knapsack) record() {
	if ks.bestZ == nil {
		ks.bestZ = make([]int, ks.nshapes)
	}
	clear(ks.bestZ)
	for i, it := range ks.items {
		ks.bestZ[it.shape] = ks.z[i]
	}
}

// greater orders a before b when a > b, for slices.SortStableFunc. Its
// stable sort is sort.SliceStable's algorithm and reads only whether the
// result is negative, so the order is the one a less of a > b gave, ties
// and all, without sort.SliceStable's reflection.
func greater(a, b float64) int {
	if a > b {
		return -1
	}
	return 0
}
