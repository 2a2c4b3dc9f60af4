// Package lpbound computes a lower bound on the hourly cost of running a set
// of pods on priced, heterogeneous nodes.
//
// The bound exists to grade packing plans: no plan, however clever, can cost
// less than the optimum of the linear-programming relaxation of the packing
// problem, so "plan $/h divided by Bound $/h" is an upper bound on how far the
// plan is from optimal. The relaxation lets nodes be fractional and lets pods
// be split across nodes, which is why the bound is usually not reachable; what
// it still captures, unlike a per-resource sum, is that a kind of node can only
// be used by the pods that fit and are allowed on it, and that complementary
// pods (cpu-heavy next to memory-heavy) can share a node.
package lpbound

import (
	"errors"
	"fmt"
	"math"
)

// Kind is one kind of node that could be launched: in practice a (NodePool,
// instance type) pair, since the same instance type can carry different
// prices and admit different pods in different pools.
type Kind struct {
	Name     string
	Price    float64   // $/h
	Capacity []float64 // length R
}

// Shape is a group of identical pods. Grouping matters for speed: the LP has
// one equality row per shape, so callers should merge pods whose requests
// and allowed kinds are equal.
type Shape struct {
	Name    string
	Count   float64
	Request []float64 // length R
	Kinds   []int     // indices into the kinds slice that this shape may use
	// PerNode caps how many pods of the shape one node may hold, as
	// hostname anti-affinity among them does; 0 is no cap. Bound ignores
	// it (a relaxation may); Patterns honours it.
	PerNode int
}

// Result is the optimum of the relaxation.
type Result struct {
	Cost  float64            // the optimal LP objective, $/h
	Nodes map[string]float64 // kind name -> fractional y_k, only non-zero

	// LPKinds is how many kinds were left after dominance pruning, that is
	// how many the solver had to consider. It does not affect the bound; it
	// is reported so that a slow call can be told apart from a large one.
	LPKinds int

	// Assignments say how many pods of each shape the optimum puts on each
	// kind, so a packer can round the relaxation into whole nodes.
	Assignments []Assignment
}

// Assignment is x_sk of the optimum: Pods pods of shape Shape on kind Kind
// (indices into the slices given to Bound).
type Assignment struct {
	Shape, Kind int
	Pods        float64
}

// Bound solves the LP
//
//	minimise   Σ_k price_k·y_k
//	subject to Σ_k x_sk = count_s                  for every shape s
//	           Σ_s x_sk·req_sr ≤ y_k·cap_kr        for every kind k, resource r
//	           x, y ≥ 0, x_sk only for allowed pairs
//
// and returns its optimum. It returns an error naming the shape when a shape
// with pods has no usable kind, because then no plan exists and any number
// returned would be meaningless.
//
// The answer is checked before it is returned: the point must satisfy the
// constraints, and its cost must agree to 1e-6 with a lower bound built
// from the dual solution, which holds however the simplex got there. When
// either check fails the error wraps ErrNumerical. Cost is Σ price·Nodes;
// kinds sharing a name are summed in Nodes.
//
// Shapes with Count 0 are ignored. Shapes whose requests are all zero, or
// that may use a kind priced at zero, cost nothing in the relaxation, so they
// only need a usable kind; leaving them out also means every kind the solver
// sees has a positive price, which its scaling relies on. Kinds listed by a
// shape that would not fit one of its pods are dropped for that shape.
func Bound(kinds []Kind, shapes []Shape) (Result, error) {
	res, _, err := bound(kinds, shapes, true)
	return res, err
}

// bound is Bound with pruning optional, so tests can check that pruning does
// not move the optimum, and with solver statistics.
func bound(kinds []Kind, shapes []Shape, prune bool) (Result, stats, error) {
	p, err := newProblem(kinds, shapes)
	if err != nil {
		return Result{}, stats{}, err
	}
	res := Result{Nodes: map[string]float64{}}
	if len(p.shapes) == 0 {
		return res, stats{}, nil
	}
	if prune {
		p.pruneDominated()
	}
	p.reduceRows()
	res.LPKinds = len(p.kinds)

	y, assign, st, err := p.solve()
	if err != nil {
		return Result{}, st, err
	}
	for _, a := range assign {
		res.Assignments = append(res.Assignments, Assignment{Shape: p.shapes[a.Shape].orig, Kind: p.kinds[a.Kind].orig, Pods: a.Pods})
	}
	for i, k := range p.kinds {
		if y[i] <= 0 {
			continue
		}
		kd := kinds[k.orig]
		res.Nodes[kd.Name] += y[i]
		res.Cost += kd.Price * y[i]
	}
	return res, st, nil
}

// problem is the input after validation and the cheap, exact reductions:
// free shapes removed, kinds nobody can use removed, and every index
// translated so the solver does not need to know about them.
type problem struct {
	nres   int
	kinds  []pkind
	shapes []pshape
}

type pkind struct {
	orig  int
	price float64
	cap   []float64
	// shapes that may use this kind and fit on it, as indices into
	// problem.shapes, ascending. This is the only record of allowed pairs.
	shapes []int
	// rows are the resources that still need a capacity row in the LP. See
	// reduceRows.
	rows []int
}

type pshape struct {
	orig  int
	name  string
	count float64
	req   []float64
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

func newProblem(kinds []Kind, shapes []Shape) (*problem, error) {
	nres := -1
	if len(kinds) > 0 {
		nres = len(kinds[0].Capacity)
	} else if len(shapes) > 0 {
		nres = len(shapes[0].Request)
	}
	for _, k := range kinds {
		if len(k.Capacity) != nres {
			return nil, fmt.Errorf("lpbound: kind %q has %d resources, want %d", k.Name, len(k.Capacity), nres)
		}
		if !finiteNonNeg(k.Price) {
			return nil, fmt.Errorf("lpbound: kind %q has invalid price %v", k.Name, k.Price)
		}
		for r, c := range k.Capacity {
			if !finiteNonNeg(c) {
				return nil, fmt.Errorf("lpbound: kind %q has invalid capacity %v for resource %d", k.Name, c, r)
			}
		}
	}

	p := &problem{nres: nres}
	kindIdx := make([]int, len(kinds)) // original kind -> problem kind, -1 if unused
	for i := range kindIdx {
		kindIdx[i] = -1
	}
	seen := make([]int, len(kinds)) // seen[k] == si+1: shape si already has kind k
	for si, s := range shapes {
		if len(s.Request) != nres {
			return nil, fmt.Errorf("lpbound: shape %q has %d resources, want %d", s.Name, len(s.Request), nres)
		}
		if !finiteNonNeg(s.Count) {
			return nil, fmt.Errorf("lpbound: shape %q has invalid count %v", s.Name, s.Count)
		}
		zero := true
		for r, q := range s.Request {
			if !finiteNonNeg(q) {
				return nil, fmt.Errorf("lpbound: shape %q has invalid request %v for resource %d", s.Name, q, r)
			}
			if q > 0 {
				zero = false
			}
		}
		for _, k := range s.Kinds {
			if k < 0 || k >= len(kinds) {
				return nil, fmt.Errorf("lpbound: shape %q lists kind index %d, have %d kinds", s.Name, k, len(kinds))
			}
		}
		if s.Count == 0 {
			continue
		}
		usable, free := false, zero
		for _, k := range s.Kinds {
			if fits(s.Request, kinds[k].Capacity) {
				usable = true
				free = free || kinds[k].Price == 0
			}
		}
		if !usable {
			return nil, fmt.Errorf("lpbound: shape %q has no usable kind", s.Name)
		}
		if free {
			continue
		}
		ps := pshape{orig: si, name: s.Name, count: s.Count, req: s.Request}
		pi := len(p.shapes)
		for _, k := range s.Kinds {
			if seen[k] == si+1 || !fits(s.Request, kinds[k].Capacity) {
				continue
			}
			seen[k] = si + 1 // callers may list a kind twice
			if kindIdx[k] < 0 {
				kindIdx[k] = len(p.kinds)
				p.kinds = append(p.kinds, pkind{orig: k, price: kinds[k].Price, cap: kinds[k].Capacity})
			}
			p.kinds[kindIdx[k]].shapes = append(p.kinds[kindIdx[k]].shapes, pi)
		}
		p.shapes = append(p.shapes, ps)
	}
	return p, nil
}

func fits(req, capacity []float64) bool {
	for r := range req {
		if req[r] > capacity[r] {
			return false
		}
	}
	return true
}

// ErrNumerical wraps failures that come from floating point rather than from
// the input, so a caller can tell "this input is wrong" from "the solver
// could not certify an answer" and, for the latter, report no ratio instead
// of a wrong one.
var ErrNumerical = errors.New("lpbound: numerical failure")
