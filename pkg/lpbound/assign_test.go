package lpbound

import (
	"math"
	"testing"
)

// TestAssignments checks that the optimum's assignments place every pod and
// respect every kind's capacity, which is what rounding them relies on.
func TestAssignments(t *testing.T) {
	cases := []struct {
		name   string
		kinds  []Kind
		shapes []Shape
	}{
		{name: "complementary shapes share a kind",
			kinds:  []Kind{{Name: "cpu", Price: 1, Capacity: []float64{8, 16}}, {Name: "mem", Price: 1.2, Capacity: []float64{4, 32}}},
			shapes: []Shape{{Name: "c", Count: 100, Request: []float64{2, 1}, Kinds: []int{0, 1}}, {Name: "m", Count: 60, Request: []float64{0.5, 4}, Kinds: []int{0, 1}}}},
		{name: "restricted shape",
			kinds:  []Kind{{Name: "a", Price: 1, Capacity: []float64{4, 8}}, {Name: "b", Price: 3, Capacity: []float64{16, 64}}},
			shapes: []Shape{{Name: "x", Count: 10, Request: []float64{1, 2}, Kinds: []int{0, 1}}, {Name: "y", Count: 7, Request: []float64{1, 2}, Kinds: []int{1}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Bound(tc.kinds, tc.shapes)
			if err != nil {
				t.Fatal(err)
			}
			placed := make([]float64, len(tc.shapes))
			load := make([][]float64, len(tc.kinds))
			for i := range load {
				load[i] = make([]float64, 2)
			}
			for _, a := range res.Assignments {
				placed[a.Shape] += a.Pods
				for r := range 2 {
					load[a.Kind][r] += a.Pods * tc.shapes[a.Shape].Request[r]
				}
			}
			for s, sh := range tc.shapes {
				if math.Abs(placed[s]-sh.Count) > 1e-6*sh.Count {
					t.Errorf("shape %s: %v placed of %v", sh.Name, placed[s], sh.Count)
				}
			}
			for k, kd := range tc.kinds {
				for r := range 2 {
					if load[k][r] > res.Nodes[kd.Name]*kd.Capacity[r]*(1+1e-6)+1e-9 {
						t.Errorf("kind %s resource %d: load %v over %v nodes × %v", kd.Name, r, load[k][r], res.Nodes[kd.Name], kd.Capacity[r])
					}
				}
			}
		})
	}
}
