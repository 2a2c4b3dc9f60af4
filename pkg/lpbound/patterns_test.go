package lpbound

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestPatterns(t *testing.T) {
	one := func(name string, price, capacity float64) Kind {
		return Kind{Name: name, Price: price, Capacity: []float64{capacity}}
	}
	cases := []struct {
		name      string
		kinds     []Kind
		shapes    []Shape
		limits    []Limit
		want      float64 // configuration LP optimum
		uncovered float64 // pods left to the artificial column
	}{
		{
			// The assignment LP splits pods and says 1.8; whole pods need
			// a node each.
			name:   "one pod per node",
			kinds:  []Kind{one("k", 1, 10)},
			shapes: []Shape{{Name: "six", Count: 3, Request: []float64{6}, Kinds: []int{0}}},
			want:   3,
		},
		{
			// Pairs of 6 and 4 fill a node exactly.
			name:  "complementary pair",
			kinds: []Kind{one("k", 1, 10)},
			shapes: []Shape{
				{Name: "six", Count: 2, Request: []float64{6}, Kinds: []int{0}},
				{Name: "four", Count: 2, Request: []float64{4}, Kinds: []int{0}},
			},
			want: 2,
		},
		{
			// A big node holds three at 2/3 each, a small one one at 1.
			name:   "cheapest per pod",
			kinds:  []Kind{one("small", 1, 4), one("big", 2, 10)},
			shapes: []Shape{{Name: "three", Count: 4, Request: []float64{3}, Kinds: []int{0, 1}}},
			want:   2 * 4.0 / 3,
		},
		{
			// Anti-affinity: one pod per node, so the small kind wins.
			name:   "per-node cap",
			kinds:  []Kind{one("small", 1, 4), one("big", 2, 10)},
			shapes: []Shape{{Name: "three", Count: 4, Request: []float64{3}, Kinds: []int{0, 1}, PerNode: 1}},
			want:   4,
		},
		{
			// Only one big node is allowed; the fourth pod needs a small one.
			name:   "limit",
			kinds:  []Kind{one("small", 1, 4), one("big", 2, 10)},
			shapes: []Shape{{Name: "three", Count: 4, Request: []float64{3}, Kinds: []int{0, 1}}},
			limits: []Limit{{Name: "nodes", Kinds: []int{1}, Use: []float64{1}, Max: 1}},
			want:   3,
		},
		{
			name:      "limit leaves pods uncovered",
			kinds:     []Kind{one("k", 1, 10)},
			shapes:    []Shape{{Name: "six", Count: 3, Request: []float64{6}, Kinds: []int{0}}},
			limits:    []Limit{{Name: "cpu", Kinds: []int{0}, Use: []float64{10}, Max: 20}},
			want:      2,
			uncovered: 1,
		},
		{
			// Two resources: cpu-heavy and memory-heavy pods share nodes.
			name:  "two resources",
			kinds: []Kind{{Name: "k", Price: 1, Capacity: []float64{4, 16}}},
			shapes: []Shape{
				{Name: "cpu", Count: 10, Request: []float64{3, 2}, Kinds: []int{0}},
				{Name: "mem", Count: 10, Request: []float64{1, 14}, Kinds: []int{0}},
			},
			want: 10,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Patterns(c.kinds, c.shapes, c.limits, PatternOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(res.LP-c.want) > 1e-6 {
				t.Errorf("LP = %v, want %v", res.LP, c.want)
			}
			un := 0.0
			for _, u := range res.Uncovered {
				un += u
			}
			if math.Abs(un-c.uncovered) > 1e-6 {
				t.Errorf("uncovered = %v, want %v", un, c.uncovered)
			}
			if c.uncovered == 0 {
				if !res.Exact {
					t.Errorf("not exact")
				}
				if res.Bound > res.LP+1e-9 || res.Bound < res.LP/(1+3*1e-4) {
					t.Errorf("bound %v, LP %v", res.Bound, res.LP)
				}
			}
			checkPatterns(t, c.kinds, c.shapes, res)
		})
	}
}

// checkPatterns checks that every pattern fits its kind and its shapes may
// use it, and that λ covers every shape.
func checkPatterns(t *testing.T, kinds []Kind, shapes []Shape, res PatternResult) {
	t.Helper()
	cover := make([]float64, len(shapes))
	for i, p := range res.Patterns {
		used := make([]float64, len(kinds[p.Kind].Capacity))
		for s, n := range p.Counts {
			if n == 0 {
				continue
			}
			allowed := false
			for _, k := range shapes[s].Kinds {
				allowed = allowed || k == p.Kind
			}
			if !allowed {
				t.Errorf("pattern %d puts shape %s on kind %s", i, shapes[s].Name, kinds[p.Kind].Name)
			}
			if shapes[s].PerNode > 0 && n > shapes[s].PerNode {
				t.Errorf("pattern %d holds %d of shape %s, cap %d", i, n, shapes[s].Name, shapes[s].PerNode)
			}
			for r, q := range shapes[s].Request {
				used[r] += float64(n) * q
			}
			cover[s] += float64(n) * res.Use[i]
		}
		for r, u := range used {
			if u > kinds[p.Kind].Capacity[r]+1e-9 {
				t.Errorf("pattern %d overfills %s: %v > %v", i, kinds[p.Kind].Name, u, kinds[p.Kind].Capacity[r])
			}
		}
	}
	for s, sh := range shapes {
		if cover[s]+res.Uncovered[s] < sh.Count-1e-6 {
			t.Errorf("shape %s covered %v of %v", sh.Name, cover[s]+res.Uncovered[s], sh.Count)
		}
	}
}

// TestPatternsBoundBelowEveryPlan checks Bound against integer plans: on
// random instances small enough to enumerate, the best plan that buys whole
// nodes holding whole pods costs at least Bound, and at least LP/(1+2·tol).
func TestPatternsBoundBelowEveryPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 200 {
		kinds := []Kind{
			{Name: "a", Price: 1 + rng.Float64(), Capacity: []float64{float64(4 + rng.IntN(6)), float64(4 + rng.IntN(6))}},
			{Name: "b", Price: 2 + 2*rng.Float64(), Capacity: []float64{float64(8 + rng.IntN(8)), float64(8 + rng.IntN(8))}},
		}
		var shapes []Shape
		for s := range 2 {
			shapes = append(shapes, Shape{Name: string(rune('x' + s)), Count: float64(1 + rng.IntN(4)),
				Request: []float64{float64(1 + rng.IntN(4)), float64(1 + rng.IntN(4))}, Kinds: []int{0, 1}})
		}
		res, err := Patterns(kinds, shapes, nil, PatternOptions{})
		if err != nil {
			t.Fatal(err)
		}
		best := bestIntegerPlan(kinds, shapes)
		if res.Bound > best+1e-9 {
			t.Fatalf("trial %d: bound %v above the best plan %v", trial, res.Bound, best)
		}
		if !res.Exact || res.Bound < res.LP/(1+2e-4) {
			t.Fatalf("trial %d: bound %v, LP %v, exact %v", trial, res.Bound, res.LP, res.Exact)
		}
		checkPatterns(t, kinds, shapes, res)
		// Cut short, the master is not optimal and its LP may be above
		// the best plan; the bound must still be below it.
		cut, err := Patterns(kinds, shapes, nil, PatternOptions{KnapsackNodes: 1, MaxRounds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if cut.Bound > best+1e-9 || cut.Bound > cut.LP+1e-9 {
			t.Fatalf("trial %d, cut short: bound %v, LP %v, best plan %v", trial, cut.Bound, cut.LP, best)
		}
	}
}

// bestIntegerPlan enumerates node counts of each kind and checks by brute
// force whether the pods fit: tiny instances only.
func bestIntegerPlan(kinds []Kind, shapes []Shape) float64 {
	total := 0
	for _, s := range shapes {
		total += int(s.Count)
	}
	best := math.Inf(1)
	for na := 0; na <= total; na++ {
		for nb := 0; nb <= total; nb++ {
			cost := float64(na)*kinds[0].Price + float64(nb)*kinds[1].Price
			if cost >= best {
				continue
			}
			var nodes [][]float64
			for range na {
				nodes = append(nodes, append([]float64(nil), kinds[0].Capacity...))
			}
			for range nb {
				nodes = append(nodes, append([]float64(nil), kinds[1].Capacity...))
			}
			var pods [][]float64
			for _, s := range shapes {
				for range int(s.Count) {
					pods = append(pods, s.Request)
				}
			}
			if place(pods, nodes) {
				best = cost
			}
		}
	}
	return best
}

func place(pods, nodes [][]float64) bool {
	if len(pods) == 0 {
		return true
	}
	p := pods[0]
	for _, n := range nodes {
		if p[0] <= n[0] && p[1] <= n[1] {
			n[0] -= p[0]
			n[1] -= p[1]
			ok := place(pods[1:], nodes)
			n[0] += p[0]
			n[1] += p[1]
			if ok {
				return true
			}
		}
	}
	return false
}

// TestKnapsackMatchesEnumeration checks the pricing search against every
// contents of small random nodes.
func TestKnapsackMatchesEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := range 300 {
		nres, nitems := 1+rng.IntN(3), 1+rng.IntN(4)
		ks := &knapsack{cap: make([]float64, nres), nshapes: nitems}
		for r := range ks.cap {
			ks.cap[r] = float64(5 + rng.IntN(15))
		}
		for i := range nitems {
			it := kitem{shape: i, v: rng.Float64(), req: make([]float64, nres), ub: 1 + rng.IntN(6)}
			for r := range it.req {
				it.req[r] = float64(rng.IntN(5)) // zeros too
			}
			ks.items = append(ks.items, it)
		}
		want := enumerate(ks.cap, ks.items)
		ks.prepare()
		if up := ks.upper(); up < want-1e-9 {
			t.Fatalf("trial %d: upper bound %v below the optimum %v", trial, up, want)
		}
		z, v, exact := ks.solve(0, 1<<30)
		if !exact {
			t.Fatalf("trial %d: not exact", trial)
		}
		if want > 0 && (z == nil || math.Abs(v-want) > 1e-9) {
			t.Fatalf("trial %d: got %v (%v), want %v", trial, v, z, want)
		}
	}
}

func enumerate(capacity []float64, items []kitem) float64 {
	var rec func(i int, rem []float64) float64
	rec = func(i int, rem []float64) float64 {
		if i == len(items) {
			return 0
		}
		best := 0.0
		for t := 0; t <= items[i].ub; t++ {
			ok := true
			next := make([]float64, len(rem))
			for r := range rem {
				next[r] = rem[r] - float64(t)*items[i].req[r]
				ok = ok && next[r] >= 0
			}
			if !ok {
				break
			}
			best = max(best, float64(t)*items[i].v+rec(i+1, next))
		}
		return best
	}
	return rec(0, capacity)
}
