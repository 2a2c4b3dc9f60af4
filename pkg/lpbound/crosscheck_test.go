package lpbound

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/lpbound/lpcheck"
	"gonum.org/v1/gonum/mat"
)

// randomInstance draws a small instance with the structure pruning feeds
// on: kinds come in a few families (one capacity profile each) and sizes,
// priced roughly by size, sometimes exactly proportionally so that ties
// occur; shapes may use a random subset of the kinds that fit them.
func randomInstance(rng *rand.Rand, nk, ns, nr int) ([]Kind, []Shape) {
	const families = 3
	profile := make([][]float64, families)
	rate := make([]float64, families)
	for f := range profile {
		profile[f] = make([]float64, nr)
		for r := range profile[f] {
			profile[f][r] = 0.5 + 1.5*rng.Float64()
		}
		rate[f] = 0.5 + rng.Float64()
	}
	kinds := make([]Kind, nk)
	for i := range kinds {
		f := rng.IntN(families)
		size := float64(int(1) << rng.IntN(3))
		capacity := make([]float64, nr)
		for r := range capacity {
			capacity[r] = size * profile[f][r] * 4
		}
		noise := 1.0
		if rng.IntN(5) != 0 {
			noise += 0.2 * (rng.Float64() - 0.5)
		}
		kinds[i] = Kind{Name: fmt.Sprintf("k%d", i), Price: size * rate[f] * noise, Capacity: capacity}
	}
	shapes := make([]Shape, ns)
	for i := range shapes {
		for {
			req := make([]float64, nr)
			for r := range req {
				req[r] = 0.2 + 3*rng.Float64()*rng.Float64()
			}
			s := Shape{Name: fmt.Sprintf("s%d", i), Count: float64(1 + rng.IntN(20)), Request: req}
			for k := range kinds {
				if fits(req, kinds[k].Capacity) && rng.IntN(10) < 7 {
					s.Kinds = append(s.Kinds, k)
				}
			}
			if len(s.Kinds) > 0 {
				shapes[i] = s
				break
			}
		}
	}
	return kinds, shapes
}

// directLP builds the LP of Bound's comment literally (lpcheck.Literal),
// without any of the package's reductions or scaling.
func directLP(kinds []Kind, shapes []Shape) (c []float64, A *mat.Dense, b []float64) {
	ks := make([]lpcheck.Kind, len(kinds))
	for i, k := range kinds {
		ks[i] = lpcheck.Kind{Price: k.Price, Capacity: k.Capacity}
	}
	ss := make([]lpcheck.Shape, len(shapes))
	for i, s := range shapes {
		ss[i] = lpcheck.Shape{Count: s.Count, Request: s.Request, Kinds: s.Kinds}
	}
	return lpcheck.Literal(ks, ss)
}

// TestBoundMatchesGonum compares against gonum's simplex on the literal
// formulation, which shares no code with the package's solver: not the
// pruning, the row reduction, the scaling, the column generation or the
// simplex.
func TestBoundMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100 {
		kinds, shapes := randomInstance(rng, 2+rng.IntN(7), 1+rng.IntN(4), 2+rng.IntN(2))
		c, A, b := directLP(kinds, shapes)
		want, err := lpcheck.Simplex(c, A, b)
		if err != nil {
			t.Fatalf("instance %d: gonum: %v", i, err)
		}
		got, err := Bound(kinds, shapes)
		if err != nil {
			t.Fatalf("instance %d: Bound: %v", i, err)
		}
		if !near(got.Cost, want) {
			t.Errorf("instance %d: Bound %.12g, gonum %.12g", i, got.Cost, want)
		}
		checkCostMatchesNodes(t, kinds, got)
	}
}

// spreadMagnitudes multiplies counts by up to 10⁶ and prices by up to 10³
// at random. Single-pod shapes next to million-pod ones is what broke an
// earlier scaling of the master; see colgen's comment.
func spreadMagnitudes(rng *rand.Rand, kinds []Kind, shapes []Shape) {
	for i := range shapes {
		shapes[i].Count *= math.Pow(10, float64(rng.IntN(7)))
	}
	for i := range kinds {
		kinds[i].Price *= math.Pow(10, float64(rng.IntN(4)))
	}
}

// TestBoundBruteForce enumerates every basis of the literal formulation
// and keeps the cheapest feasible one. An LP's optimum is attained at a
// basic feasible solution, so this is the optimum, found without any
// simplex at all. Half the instances have wildly different magnitudes.
func TestBoundBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for i := 0; checked < 100; i++ {
		kinds, shapes := randomInstance(rng, 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(3))
		if i%2 == 1 {
			spreadMagnitudes(rng, kinds, shapes)
		}
		c, A, b := directLP(kinds, shapes)
		if m, n := A.Dims(); m > 11 || n > 22 {
			continue // C(n, m) bases would take too long
		}
		checked++
		want := bruteForceLP(c, A, b)
		got, err := Bound(kinds, shapes)
		if err != nil {
			t.Fatalf("instance %d: Bound: %v", i, err)
		}
		if !near(got.Cost, want) {
			t.Errorf("instance %d: Bound %.12g, brute force %.12g", i, got.Cost, want)
		}
	}
}

func bruteForceLP(c []float64, A *mat.Dense, b []float64) float64 {
	m, n := A.Dims()
	best := math.Inf(1)
	cols := make([]int, m)
	B := mat.NewDense(m, m, nil)
	bv := mat.NewVecDense(m, b)
	var x mat.VecDense
	var rec func(start, depth int)
	rec = func(start, depth int) {
		if depth == m {
			for i, j := range cols {
				B.SetCol(i, mat.Col(nil, j, A))
			}
			if err := x.SolveVec(B, bv); err != nil {
				return // singular: not a basis
			}
			cost := 0.0
			for i, j := range cols {
				if x.AtVec(i) < -1e-9 {
					return
				}
				cost += c[j] * x.AtVec(i)
			}
			best = math.Min(best, cost)
			return
		}
		for j := start; j <= n-(m-depth); j++ {
			cols[depth] = j
			rec(j+1, depth+1)
		}
	}
	rec(0, 0)
	return best
}

// TestPruningKeepsOptimum solves random instances with and without
// dominance pruning. The instances are built so that pruning often
// removes kinds, and the test insists it did on a good share of them, so
// that it cannot pass by pruning nothing.
func TestPruningKeepsOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 200
	pruned := 0
	for i := range n {
		kinds, shapes := randomInstance(rng, 10, 4, 3)
		if i%2 == 1 {
			spreadMagnitudes(rng, kinds, shapes)
		}
		with, _, err := bound(kinds, shapes, true)
		if err != nil {
			t.Fatalf("instance %d pruned: %v", i, err)
		}
		without, _, err := bound(kinds, shapes, false)
		if err != nil {
			t.Fatalf("instance %d unpruned: %v", i, err)
		}
		if !near(with.Cost, without.Cost) {
			t.Errorf("instance %d: pruned %.12g, unpruned %.12g", i, with.Cost, without.Cost)
		}
		if with.LPKinds < without.LPKinds {
			pruned++
		}
	}
	if pruned < n/2 {
		t.Errorf("pruning removed kinds in only %d of %d instances", pruned, n)
	}
	t.Logf("pruning removed kinds in %d of %d instances", pruned, n)
}
