// Package lpcheck solves the node-buying LP the plain way, for tests to
// check faster solvers against: the literal formulation, handed to gonum's
// simplex, with none of lpbound's pruning, reductions, scaling or column
// generation. Its types mirror lpbound's rather than using them, so that
// lpbound's own tests can import it.
package lpcheck

import (
	"errors"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// Kind is a node one may buy any number of, at Price each.
type Kind struct {
	Price    float64
	Capacity []float64 // per resource
}

// Shape is Count identical items with a Request per resource, which may go
// on the Kinds listed (indices) that they fit.
type Shape struct {
	Count   float64
	Request []float64
	Kinds   []int
}

// Literal builds the LP in gonum's standard form (minimise c·x, Ax = b,
// x ≥ 0): columns are y_k for every kind, x_sk for every listed kind shape
// s fits, and a slack per kind and resource; rows are Σ_k x_sk = Count_s per
// shape, and Σ_s Request_sr·x_sk + slack = Capacity_kr·y_k per kind and
// resource.
func Literal(kinds []Kind, shapes []Shape) (c []float64, A *mat.Dense, b []float64) {
	nr := len(kinds[0].Capacity)
	type pair struct{ s, k int }
	var pairs []pair
	for si, s := range shapes {
		seen := map[int]bool{}
		for _, k := range s.Kinds {
			if !seen[k] && fits(s.Request, kinds[k].Capacity) {
				seen[k] = true
				pairs = append(pairs, pair{si, k})
			}
		}
	}
	m := len(shapes) + len(kinds)*nr
	n := len(kinds) + len(pairs) + len(kinds)*nr
	A = mat.NewDense(m, n, nil)
	b = make([]float64, m)
	c = make([]float64, n)
	row := func(k, r int) int { return len(shapes) + k*nr + r }
	for k, kd := range kinds {
		c[k] = kd.Price
		for r := range nr {
			A.Set(row(k, r), k, -kd.Capacity[r])
			A.Set(row(k, r), len(kinds)+len(pairs)+k*nr+r, 1)
		}
	}
	for j, p := range pairs {
		col := len(kinds) + j
		A.Set(p.s, col, 1)
		for r := range nr {
			A.Set(row(p.k, r), col, shapes[p.s].Request[r])
		}
	}
	for si, s := range shapes {
		b[si] = s.Count
	}
	return c, A, b
}

func fits(req, capacity []float64) bool {
	for r := range req {
		if req[r] > capacity[r] {
			return false
		}
	}
	return true
}

// Simplex runs gonum's solver with a time limit, because it has no
// iteration limit and was seen to cycle forever on some random instances
// of this LP. A hang should fail a test with a reason, not time out the
// whole package. Keep magnitudes alike across resources (cores and GiB,
// not bytes): gonum reports a badly scaled A as singular.
func Simplex(c []float64, A *mat.Dense, b []float64) (float64, error) {
	type answer struct {
		opt float64
		err error
	}
	done := make(chan answer, 1)
	go func() {
		opt, _, err := lp.Simplex(c, A, b, 1e-10, nil)
		done <- answer{opt, err}
	}()
	select {
	case a := <-done:
		return a.opt, a.err
	case <-time.After(30 * time.Second):
		return 0, errors.New("no answer in 30s; gonum's simplex has no iteration limit")
	}
}

// Solve is the optimum of the literal LP.
func Solve(kinds []Kind, shapes []Shape) (float64, error) {
	return Simplex(Literal(kinds, shapes))
}
