package lpbound

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// This file is a small revised simplex method. It exists because column
// generation needs things gonum's lp.Simplex does not offer: the dual
// values, a warm start from the previous optimal basis after rows and
// columns are added, a pivot that does not refactor the basis three times,
// and an iteration limit. gonum's solver was tried first, on the pruned
// direct formulation with a feasible starting basis and the same scaling:
// on the synthetic 1,392-kind catalogue it took 0.1-0.4 s for 4 shapes and
// 8-115 s for 20-50 shapes (the basis is 150-480 rows), and almost every
// run ended in a singular-basis error. On some random instances of 20 rows
// it never returns at all. It is still used, on small instances only, as
// the independent reference in the tests.

const (
	// optTol is the reduced cost below which a column is considered
	// improving. Callers scale costs to at most 1 in magnitude and duals
	// to about 1, so this is relative.
	optTol = 1e-11
	// pivTol is the smallest direction entry accepted as a pivot; smaller
	// ones would amplify rounding in the basis inverse.
	pivTol = 1e-9
	// harrisTol is the primal infeasibility the ratio test may tolerate to
	// prefer a larger, better conditioned pivot among near-ties. Callers
	// scale variables so the objective is about 1, so this is relative to
	// the objective.
	harrisTol = 1e-10
	// refactorEvery bounds the rounding accumulated by the product-form
	// updates of the basis inverse. A refactorisation costs m³ against m²
	// per pivot, so large bases refactor less often, at most every m pivots.
	refactorEvery = 64
	// blandAfter is how many degenerate pivots in a row are tolerated
	// before switching to Bland's rule, which cannot cycle but converges
	// slowly.
	blandAfter = 30
	// feasTol is the residual of A x = b accepted in a final answer. In
	// the master every row is in units of the total cost, so a residual of
	// feasTol can move the bound by about that fraction; actual residuals
	// are around 1e-15.
	feasTol = 1e-7
)

// spCol is a sparse column. Columns of both LPs solved here have at most
// a handful of non-zeros (a configuration mixes at most R shapes), so
// pricing costs O(non-zeros) per column instead of O(rows).
type spCol struct {
	rows []int
	vals []float64
}

// rsimplex solves min cost·x s.t. A x = b, x ≥ 0 from a feasible basis.
// Columns may be added between solves; the basis is kept, which is what
// makes column generation cheap.
type rsimplex struct {
	m     int
	b     []float64
	cols  []spCol
	cost  []float64
	basis []int     // basis[i] is the column basic in position i
	pos   []int     // pos[j] is the position of column j in the basis, or -1
	binv  []float64 // basis inverse, m×m row-major
	xb    []float64 // values of the basic variables
	u     []float64 // duals of the rows, valid after solve
	since int       // pivots since the last refactorisation
	iters int       // pivots in total, for diagnostics
}

func newRSimplex(b []float64) *rsimplex {
	m := len(b)
	return &rsimplex{
		m:    m,
		b:    b,
		binv: make([]float64, m*m),
		xb:   make([]float64, m),
		u:    make([]float64, m),
	}
}

// addRows appends rows with the given right-hand sides. Existing columns
// are zero in them, so the caller must add columns and set a basis (with
// setBasis) before solving again.
func (s *rsimplex) addRows(b ...float64) {
	s.b = append(s.b, b...)
	s.m = len(s.b)
	s.binv = make([]float64, s.m*s.m)
	s.xb = make([]float64, s.m)
	s.u = make([]float64, s.m)
}

func (s *rsimplex) addCol(c spCol, cost float64) int {
	s.cols = append(s.cols, c)
	s.cost = append(s.cost, cost)
	s.pos = append(s.pos, -1)
	return len(s.cols) - 1
}

// setBasis installs a basis, which must be feasible.
func (s *rsimplex) setBasis(basis []int) error {
	if len(basis) != s.m {
		return fmt.Errorf("%w: basis has %d columns for %d rows", ErrNumerical, len(basis), s.m)
	}
	for _, j := range s.basis {
		s.pos[j] = -1
	}
	s.basis = append(s.basis[:0], basis...)
	for i, j := range s.basis {
		s.pos[j] = i
	}
	return s.refactor()
}

// refactor recomputes the basis inverse and the basic values from scratch.
func (s *rsimplex) refactor() error {
	m := s.m
	B := mat.NewDense(m, m, nil)
	for i, j := range s.basis {
		c := s.cols[j]
		for t, r := range c.rows {
			B.Set(r, i, c.vals[t])
		}
	}
	inv := mat.NewDense(m, m, s.binv)
	if err := inv.Inverse(B); err != nil {
		return fmt.Errorf("%w: basis inverse: %v", ErrNumerical, err)
	}
	for i := range m {
		row := s.binv[i*m : (i+1)*m]
		v := 0.0
		for r, br := range s.b {
			v += row[r] * br
		}
		if v < 0 {
			// Harris's ratio test lets basic values dip below zero by
			// harrisTol per pivot; more than that means a wrong basis.
			if v < -feasTol {
				return fmt.Errorf("%w: basis infeasible (%g)", ErrNumerical, v)
			}
			v = 0
		}
		s.xb[i] = v
	}
	s.since = 0
	s.computeDuals()
	return nil
}

func (s *rsimplex) computeDuals() {
	m := s.m
	clear(s.u)
	for i, j := range s.basis {
		cb := s.cost[j]
		if cb == 0 {
			continue
		}
		row := s.binv[i*m : (i+1)*m]
		for r := range m {
			s.u[r] += cb * row[r]
		}
	}
}

func (s *rsimplex) reducedCost(j int) float64 {
	c := s.cols[j]
	d := s.cost[j]
	for t, r := range c.rows {
		d -= s.u[r] * c.vals[t]
	}
	return d
}

// solve pivots to optimality. Dantzig's rule picks the entering column,
// switching to Bland's rule after a run of degenerate pivots; the ratio test
// is Harris's two-pass test. Both are textbook choices for keeping a dense
// simplex stable without a presolve.
func (s *rsimplex) solve() error {
	m := s.m
	w := make([]float64, m)
	maxIters := s.iters + 100*(m+len(s.cols)) + 1000
	refactorAt := max(refactorEvery, m)
	degenerate := 0
	s.computeDuals()
	for {
		bland := degenerate >= blandAfter
		enter, best := -1, -optTol
		for j := range s.cols {
			if s.pos[j] >= 0 {
				continue
			}
			d := s.reducedCost(j)
			if d < best {
				enter, best = j, d
				if bland {
					break // smallest index with a negative reduced cost
				}
			}
		}
		if enter < 0 {
			if s.since == 0 {
				return nil
			}
			// Confirm optimality on a fresh inverse: updated inverses
			// drift, and the duals are what the caller relies on.
			if err := s.refactor(); err != nil {
				return err
			}
			continue
		}
		if s.iters >= maxIters {
			return fmt.Errorf("%w: simplex did not converge in %d pivots", ErrNumerical, s.iters)
		}

		// w = B⁻¹ a_enter
		c := s.cols[enter]
		for i := range m {
			row := s.binv[i*m : (i+1)*m]
			v := 0.0
			for t, r := range c.rows {
				v += row[r] * c.vals[t]
			}
			w[i] = v
		}

		leave := -1
		if bland {
			ratio := math.Inf(1)
			for i := range m {
				if w[i] > pivTol {
					ratio = min(ratio, s.xb[i]/w[i])
				}
			}
			for i := range m {
				if w[i] > pivTol && s.xb[i]/w[i] <= ratio+1e-12 && (leave < 0 || s.basis[i] < s.basis[leave]) {
					leave = i
				}
			}
		} else {
			bound := math.Inf(1)
			for i := range m {
				if w[i] > pivTol {
					bound = min(bound, (s.xb[i]+harrisTol)/w[i])
				}
			}
			for i := range m {
				if w[i] > pivTol && s.xb[i]/w[i] <= bound && (leave < 0 || w[i] > w[leave]) {
					leave = i
				}
			}
		}
		if leave < 0 {
			return fmt.Errorf("%w: unbounded direction in a bounded LP", ErrNumerical)
		}

		theta := max(s.xb[leave]/w[leave], 0)
		if theta <= 1e-13 {
			degenerate++
		} else {
			degenerate = 0
		}
		for i := range m {
			if i != leave {
				s.xb[i] = max(s.xb[i]-theta*w[i], 0)
			}
		}
		s.xb[leave] = theta

		prow := s.binv[leave*m : (leave+1)*m]
		inv := 1 / w[leave]
		for r := range m {
			prow[r] *= inv
		}
		// The entering column's reduced cost must become zero, and only
		// the dual along the pivot row changes: u += d·(new row of B⁻¹).
		for r := range m {
			s.u[r] += best * prow[r]
		}
		for i := range m {
			if i == leave || w[i] == 0 {
				continue
			}
			row := s.binv[i*m : (i+1)*m]
			f := w[i]
			for r := range m {
				row[r] -= f * prow[r]
			}
		}

		s.pos[s.basis[leave]] = -1
		s.basis[leave] = enter
		s.pos[enter] = leave
		s.iters++
		s.since++
		if s.since >= refactorAt {
			if err := s.refactor(); err != nil {
				return err
			}
		}
	}
}

// value returns x_j at the current basis.
func (s *rsimplex) value(j int) float64 {
	if i := s.pos[j]; i >= 0 {
		return s.xb[i]
	}
	return 0
}

func (s *rsimplex) objective() float64 {
	v := 0.0
	for i, j := range s.basis {
		v += s.cost[j] * s.xb[i]
	}
	return v
}

// checkFeasible verifies A x = b and x ≥ 0 at the current basis, from the
// columns rather than from the basis inverse, so that drift in the inverse
// cannot hide a wrong answer.
func (s *rsimplex) checkFeasible() error {
	res := slices.Clone(s.b)
	for i, j := range s.basis {
		v := s.xb[i]
		if v < 0 {
			return fmt.Errorf("%w: basic variable %d is %g", ErrNumerical, j, v)
		}
		c := s.cols[j]
		for t, r := range c.rows {
			res[r] -= c.vals[t] * v
		}
	}
	for r, v := range res {
		if math.Abs(v) > feasTol*(1+math.Abs(s.b[r])) {
			return fmt.Errorf("%w: row %d off by %g", ErrNumerical, r, v)
		}
	}
	return nil
}
