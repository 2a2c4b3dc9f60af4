package scheduling

import (
	"math"
	"slices"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/lpbound"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
)

// lpVector is r as the rows of pkg/lpbound's kinds and shapes: cpu
// (millicores), memory (bytes), pods, ephemeral storage (bytes).
func lpVector(r resources.Resources) []float64 {
	return []float64{float64(r.CPU), float64(r.Memory), float64(r.Pods), float64(r.Ephemeral)}
}

// narrowKinds keeps, for pattern generation, the kinds the assignment LP
// buys and every kind that is at most 3% dearer than one of those per unit
// of both cpu and memory: in practice the other sizes of the families the
// LP picked, which the remainders need. Pricing then looks at tens of kinds
// instead of hundreds, for a bound that was the same on every workload of
// the offline baseline. It returns shapes with their kinds narrowed, or
// unchanged when the assignment LP fails, and the LP's per-node mixes as
// whole-pod patterns to start pattern generation from: with them the
// rounding starts where the assignment LP's rounding would end, and a
// budget cut short cannot leave it worse off.
func narrowKinds(kinds []lpbound.Kind, shapes []lpbound.Shape) ([]lpbound.Shape, []lpbound.Pattern) {
	res, err := lpbound.Bound(kinds, shapes)
	if err != nil {
		return shapes, nil
	}
	seed := mixPatterns(kinds, shapes, res)
	var used []int
	for k, kd := range kinds {
		if res.Nodes[kd.Name] > 1e-9 {
			used = append(used, k)
		}
	}
	keep := make([]bool, len(kinds))
	for k, kd := range kinds {
		for _, u := range used {
			ku := kinds[u]
			ratio := math.Inf(1)
			for r := range 2 { // cpu and memory
				if ku.Capacity[r] > 0 {
					ratio = math.Min(ratio, kd.Capacity[r]/ku.Capacity[r])
				}
			}
			if kd.Price <= 1.03*ku.Price*ratio {
				keep[k] = true
				break
			}
		}
	}
	out := make([]lpbound.Shape, len(shapes))
	for i, sh := range shapes {
		out[i] = sh
		out[i].Kinds = nil
		for _, k := range sh.Kinds {
			if keep[k] {
				out[i].Kinds = append(out[i].Kinds, k)
			}
		}
		if len(out[i].Kinds) == 0 {
			out[i].Kinds = sh.Kinds
		}
	}
	return out, seed
}

// mixPatterns turns the assignment LP's per-node mix on each kind it buys
// into a whole-pod pattern: the mix rounded down, then topped up with the
// mix's own shapes, the largest share first, while they fit.
func mixPatterns(kinds []lpbound.Kind, shapes []lpbound.Shape, res lpbound.Result) []lpbound.Pattern {
	byKind := map[int][]lpbound.Assignment{}
	for _, a := range res.Assignments {
		byKind[a.Kind] = append(byKind[a.Kind], a)
	}
	var out []lpbound.Pattern
	for k := range kinds {
		as := byKind[k]
		y := res.Nodes[kinds[k].Name]
		if len(as) == 0 || y <= 1e-9 {
			continue
		}
		sort.Slice(as, func(i, j int) bool { return as[i].Pods > as[j].Pods })
		counts := make([]int, len(shapes))
		left := slices.Clone(kinds[k].Capacity)
		take := func(si, n int) int {
			for r, q := range shapes[si].Request {
				if q > 0 {
					n = min(n, int(math.Floor(left[r]/q+1e-9)))
				}
			}
			for r, q := range shapes[si].Request {
				left[r] -= float64(n) * q
			}
			counts[si] += n
			return n
		}
		for _, a := range as {
			take(a.Shape, int(math.Floor(a.Pods/y+1e-9)))
		}
		for _, a := range as {
			take(a.Shape, math.MaxInt32)
		}
		out = append(out, lpbound.Pattern{Kind: k, Counts: counts})
	}
	return out
}
