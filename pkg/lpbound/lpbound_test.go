package lpbound

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// near reports whether a and b agree to a relative 1e-7, far tighter than
// any use of the bound needs and far looser than the solver's tolerances.
func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-7*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestBoundByHand(t *testing.T) {
	// Resources: cpu cores, memory GiB (and pods where a third is given).
	std := Kind{Name: "std", Price: 0.2, Capacity: []float64{4, 16, 110}}
	tests := []struct {
		name      string
		kinds     []Kind
		shapes    []Shape
		wantCost  float64
		wantNodes map[string]float64
		// wantActive, if non-zero, is how many kinds must have entered the
		// master, to show the pricing path was taken.
		wantActive int
	}{
		{
			// count·max_r(req_r/cap_r)·price with cpu binding: 10·(1/4)·0.2.
			name:      "one kind one shape cpu bound",
			kinds:     []Kind{std},
			shapes:    []Shape{{Name: "web", Count: 10, Request: []float64{1, 2, 1}, Kinds: []int{0}}},
			wantCost:  10 * 0.25 * 0.2,
			wantNodes: map[string]float64{"std": 2.5},
		},
		{
			// Memory binding: 6·(8/16)·0.2.
			name:      "one kind one shape memory bound",
			kinds:     []Kind{std},
			shapes:    []Shape{{Name: "cache", Count: 6, Request: []float64{0.5, 8, 1}, Kinds: []int{0}}},
			wantCost:  6 * 0.5 * 0.2,
			wantNodes: map[string]float64{"std": 3},
		},
		{
			// Pod slots binding: 220 tiny pods need 2 nodes of 110 slots.
			name:      "one kind one shape pod slots bound",
			kinds:     []Kind{std},
			shapes:    []Shape{{Name: "sidecar", Count: 220, Request: []float64{0.01, 0.01, 1}, Kinds: []int{0}}},
			wantCost:  2 * 0.2,
			wantNodes: map[string]float64{"std": 2},
		},
		{
			// Alone: cpu-heavy needs 10·2/4 = 5 nodes, memory-heavy needs
			// 10·6/16 = 3.75, 8.75 in all. Together cpu is 10·2+10·0.5 =
			// 25 cores = 6.25 nodes and memory 10·2+10·6 = 80 GiB = 5 nodes,
			// so 6.25 nodes suffice.
			name:  "complementary shapes share a kind",
			kinds: []Kind{{Name: "k", Price: 1, Capacity: []float64{4, 16}}},
			shapes: []Shape{
				{Name: "cpu-heavy", Count: 10, Request: []float64{2, 2}, Kinds: []int{0}},
				{Name: "mem-heavy", Count: 10, Request: []float64{0.5, 6}, Kinds: []int{0}},
			},
			wantCost:  6.25,
			wantNodes: map[string]float64{"k": 6.25},
		},
		{
			// The restricted shape must pay for the expensive kind: 4·(2/4)
			// nodes at 3, while the free shape uses the cheap one: 8·(1/4)
			// nodes at 1.
			name: "shape restricted to an expensive kind",
			kinds: []Kind{
				{Name: "cheap", Price: 1, Capacity: []float64{4, 16}},
				{Name: "dear", Price: 3, Capacity: []float64{4, 16}},
			},
			shapes: []Shape{
				{Name: "free", Count: 8, Request: []float64{1, 1}, Kinds: []int{0, 1}},
				{Name: "pinned", Count: 4, Request: []float64{2, 2}, Kinds: []int{1}},
			},
			wantCost:  2*1 + 2*3,
			wantNodes: map[string]float64{"cheap": 2, "dear": 2},
		},
		{
			// Alone, A is cheapest on cpu-rich "c" and B on memory-rich
			// "r" ($0.25 a pod each, $2 in all), so the master starts
			// without "b". Together both fit "b" at 1.25 nodes·$1.2 =
			// $1.5; the dual u_A = u_B = 0.1875 prices every kind out, so
			// that is optimal, and reaching it requires pricing to
			// activate "b".
			name: "pricing activates a kind nobody prefers alone",
			kinds: []Kind{
				{Name: "c", Price: 1, Capacity: []float64{4, 2}},
				{Name: "b", Price: 1.2, Capacity: []float64{4, 4}},
				{Name: "r", Price: 1, Capacity: []float64{1, 4}},
			},
			shapes: []Shape{
				{Name: "A", Count: 4, Request: []float64{1, 0.25}, Kinds: []int{0, 1, 2}},
				{Name: "B", Count: 4, Request: []float64{0.25, 1}, Kinds: []int{0, 1, 2}},
			},
			wantCost:   1.5,
			wantNodes:  map[string]float64{"b": 1.25},
			wantActive: 3,
		},
		{
			// The listed "tiny" kind cannot hold one pod and must be
			// ignored rather than make the bound too low.
			name: "kinds that do not fit are dropped",
			kinds: []Kind{
				{Name: "tiny", Price: 0.01, Capacity: []float64{1, 1}},
				{Name: "big", Price: 1, Capacity: []float64{8, 32}},
			},
			shapes:    []Shape{{Name: "s", Count: 4, Request: []float64{2, 2}, Kinds: []int{0, 1, 1}}},
			wantCost:  1,
			wantNodes: map[string]float64{"big": 1},
		},
		{
			// Zero-count shapes, shapes requesting nothing and shapes
			// allowed on a free kind add nothing.
			name: "free shapes cost nothing",
			kinds: []Kind{
				{Name: "k", Price: 1, Capacity: []float64{4, 16}},
				{Name: "free", Price: 0, Capacity: []float64{4, 16}},
			},
			shapes: []Shape{
				{Name: "none", Count: 0, Request: []float64{4, 16}, Kinds: []int{0}},
				{Name: "empty", Count: 50, Request: []float64{0, 0}, Kinds: []int{0}},
				{Name: "on-free", Count: 50, Request: []float64{1, 1}, Kinds: []int{0, 1}},
				{Name: "paid", Count: 2, Request: []float64{2, 8}, Kinds: []int{0}},
			},
			wantCost:  1,
			wantNodes: map[string]float64{"k": 1},
		},
		{
			// "half" has the same per-unit prices as "k" and is pruned;
			// "dear" is dominated outright. The bound is the same as with
			// "k" alone.
			name: "dominated kinds do not change the answer",
			kinds: []Kind{
				{Name: "half", Price: 0.5, Capacity: []float64{2, 8}},
				{Name: "k", Price: 1, Capacity: []float64{4, 16}},
				{Name: "dear", Price: 1.5, Capacity: []float64{4, 16}},
			},
			shapes:    []Shape{{Name: "s", Count: 8, Request: []float64{1, 2}, Kinds: []int{0, 1, 2}}},
			wantCost:  2,
			wantNodes: map[string]float64{"half": 4},
		},
		{
			name:      "no shapes",
			kinds:     []Kind{std},
			wantCost:  0,
			wantNodes: map[string]float64{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, st, err := bound(tt.kinds, tt.shapes, true)
			if err != nil {
				t.Fatalf("Bound: %v", err)
			}
			if !near(res.Cost, tt.wantCost) {
				t.Errorf("Cost = %.12g, want %.12g", res.Cost, tt.wantCost)
			}
			if len(res.Nodes) != len(tt.wantNodes) {
				t.Errorf("Nodes = %v, want %v", res.Nodes, tt.wantNodes)
			}
			for name, want := range tt.wantNodes {
				if got := res.Nodes[name]; !near(got, want) {
					t.Errorf("Nodes[%q] = %.12g, want %.12g (all: %v)", name, got, want, res.Nodes)
				}
			}
			if tt.wantActive != 0 && st.active != tt.wantActive {
				t.Errorf("%d kinds entered the master, want %d", st.active, tt.wantActive)
			}
			checkCostMatchesNodes(t, tt.kinds, res)
		})
	}
}

// checkCostMatchesNodes asserts that Cost is the price of Nodes, which is
// what lets a caller trust either one.
func checkCostMatchesNodes(t *testing.T, kinds []Kind, res Result) {
	t.Helper()
	price := map[string]float64{}
	for _, k := range kinds {
		price[k.Name] = k.Price
	}
	sum := 0.0
	for name, y := range res.Nodes {
		if !(y > 0) {
			t.Errorf("Nodes[%q] = %g, want only positive entries", name, y)
		}
		sum += price[name] * y
	}
	if !near(sum, res.Cost) {
		t.Errorf("Σ price·nodes = %.12g, Cost = %.12g", sum, res.Cost)
	}
}

func TestBoundComplementaryCheaperThanSeparate(t *testing.T) {
	kinds := []Kind{{Name: "k", Price: 1, Capacity: []float64{4, 16}}}
	cpu := Shape{Name: "cpu-heavy", Count: 10, Request: []float64{2, 2}, Kinds: []int{0}}
	mem := Shape{Name: "mem-heavy", Count: 10, Request: []float64{0.5, 6}, Kinds: []int{0}}
	alone := 0.0
	for _, s := range []Shape{cpu, mem} {
		res, err := Bound(kinds, []Shape{s})
		if err != nil {
			t.Fatal(err)
		}
		alone += res.Cost
	}
	both, err := Bound(kinds, []Shape{cpu, mem})
	if err != nil {
		t.Fatal(err)
	}
	if !(both.Cost < alone-1e-9) {
		t.Errorf("together %g, separately %g: sharing a node should be cheaper", both.Cost, alone)
	}
}

func TestBoundErrors(t *testing.T) {
	k := Kind{Name: "k", Price: 1, Capacity: []float64{4, 16}}
	tests := []struct {
		name   string
		kinds  []Kind
		shapes []Shape
		want   string // substring of the error
	}{
		{
			name:   "no kinds listed",
			kinds:  []Kind{k},
			shapes: []Shape{{Name: "orphan", Count: 1, Request: []float64{1, 1}}},
			want:   `shape "orphan" has no usable kind`,
		},
		{
			name:   "listed kinds too small",
			kinds:  []Kind{k},
			shapes: []Shape{{Name: "huge", Count: 1, Request: []float64{8, 1}, Kinds: []int{0}}},
			want:   `shape "huge" has no usable kind`,
		},
		{
			name:  "one good shape does not hide a bad one",
			kinds: []Kind{k},
			shapes: []Shape{
				{Name: "ok", Count: 1, Request: []float64{1, 1}, Kinds: []int{0}},
				{Name: "bad", Count: 3, Request: []float64{1, 32}, Kinds: []int{0}},
			},
			want: `shape "bad" has no usable kind`,
		},
		{
			name:   "kind index out of range",
			kinds:  []Kind{k},
			shapes: []Shape{{Name: "s", Count: 1, Request: []float64{1, 1}, Kinds: []int{1}}},
			want:   "kind index 1",
		},
		{
			name:   "resource count mismatch",
			kinds:  []Kind{k},
			shapes: []Shape{{Name: "s", Count: 1, Request: []float64{1}, Kinds: []int{0}}},
			want:   `shape "s" has 1 resources, want 2`,
		},
		{
			name:   "negative price",
			kinds:  []Kind{{Name: "neg", Price: -1, Capacity: []float64{4, 16}}},
			shapes: []Shape{{Name: "s", Count: 1, Request: []float64{1, 1}, Kinds: []int{0}}},
			want:   `kind "neg" has invalid price`,
		},
		{
			name:   "NaN count",
			kinds:  []Kind{k},
			shapes: []Shape{{Name: "s", Count: math.NaN(), Request: []float64{1, 1}, Kinds: []int{0}}},
			want:   `shape "s" has invalid count`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Bound(tt.kinds, tt.shapes)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestBoundSynthetic checks properties that any correct answer on the
// realistic catalogue must have: it is at least the best single-resource
// bound, at most the cost of a real (integral) plan, it scales linearly
// with pod counts, pruning does not change it, and more kinds can only
// lower it.
func TestBoundSynthetic(t *testing.T) {
	tests := []struct {
		name   string
		shapes int
		gpus   bool // add a GPU resource and family, see withGPUs
		spread bool // counts of 1 and 10⁶ side by side
	}{
		{"1 shape", 1, false, false},
		{"4 shapes", 4, false, false},
		{"20 shapes", 20, false, false},
		{"50 shapes", 50, false, false},
		{"50 shapes with GPUs", 50, true, false},
		{"200 shapes of 1 and 1e6 pods", 200, false, true},
	}
	for i, tt := range tests {
		rng := rand.New(rand.NewPCG(uint64(i), 99))
		kinds, pools := synthCatalog(rng, 12)
		shapes := synthShapes(rng, kinds, pools, tt.shapes)
		if tt.gpus {
			kinds, shapes = withGPUs(rng, kinds, shapes)
		}
		if tt.spread {
			for j := range shapes {
				shapes[j].Count = []float64{1, 1e6}[j%2]
			}
		}
		ns := tt.name
		res, st, err := bound(kinds, shapes, true)
		if err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		checkCostMatchesNodes(t, kinds, res)
		t.Logf("%s: $%.4f/h, %d LP kinds, %d active, %d rounds, %d pivots",
			ns, res.Cost, res.LPKinds, st.active, st.rounds, st.pivots)

		if lb := perResourceBound(kinds, shapes); res.Cost < lb*(1-1e-9) {
			t.Errorf("%s: bound %g below the per-resource bound %g", ns, res.Cost, lb)
		}
		if plan := separatePlan(kinds, shapes); res.Cost > plan*(1+1e-9) {
			t.Errorf("%s: bound %g above the integral plan %g", ns, res.Cost, plan)
		}

		doubled := make([]Shape, len(shapes))
		for i, s := range shapes {
			doubled[i] = s
			doubled[i].Count *= 2
		}
		res2, err := Bound(kinds, doubled)
		if err != nil {
			t.Fatal(err)
		}
		if !near(res2.Cost, 2*res.Cost) {
			t.Errorf("%s: doubling counts gave %g, want %g", ns, res2.Cost, 2*res.Cost)
		}

		// Pruning must not move the optimum here either.
		unpruned, _, err := bound(kinds, shapes, false)
		if err != nil {
			t.Fatal(err)
		}
		if !near(unpruned.Cost, res.Cost) {
			t.Errorf("%s: unpruned %g, pruned %g", ns, unpruned.Cost, res.Cost)
		}

		// Drop the spot pool: the bound can only go up.
		onDemand := make([]Shape, len(shapes))
		isSpot := map[int]bool{}
		for _, k := range pools[1] {
			isSpot[k] = true
		}
		for i, s := range shapes {
			onDemand[i] = s
			onDemand[i].Kinds = nil
			for _, k := range s.Kinds {
				if !isSpot[k] {
					onDemand[i].Kinds = append(onDemand[i].Kinds, k)
				}
			}
		}
		res3, err := Bound(kinds, onDemand)
		if err != nil {
			t.Fatal(err)
		}
		if res3.Cost < res.Cost*(1-1e-9) {
			t.Errorf("%s: fewer kinds gave a lower bound %g < %g", ns, res3.Cost, res.Cost)
		}
	}
}

// perResourceBound is max_r Σ_s count_s·req_sr·min_k price_k/cap_kr: each
// resource must be paid for at its cheapest allowed unit price even if
// nothing else were needed. The LP bound must be at least this.
func perResourceBound(kinds []Kind, shapes []Shape) float64 {
	best := 0.0
	for r := range kinds[0].Capacity {
		sum := 0.0
		for _, s := range shapes {
			if s.Request[r] == 0 {
				continue
			}
			unit := math.Inf(1)
			for _, k := range s.Kinds {
				if fits(s.Request, kinds[k].Capacity) {
					unit = math.Min(unit, kinds[k].Price/kinds[k].Capacity[r])
				}
			}
			sum += s.Count * s.Request[r] * unit
		}
		best = math.Max(best, sum)
	}
	return best
}

// separatePlan is the cost of a real plan: every shape on whole nodes of
// its own, of the kind that makes that cheapest. The LP bound must not
// exceed it.
func separatePlan(kinds []Kind, shapes []Shape) float64 {
	total := 0.0
	for _, s := range shapes {
		best := math.Inf(1)
		for _, ki := range s.Kinds {
			k := kinds[ki]
			perNode := math.Inf(1)
			for r, q := range s.Request {
				if q > 0 {
					perNode = math.Min(perNode, math.Floor(k.Capacity[r]/q))
				}
			}
			if perNode >= 1 {
				best = math.Min(best, math.Ceil(s.Count/perNode)*k.Price)
			}
		}
		total += best
	}
	return total
}
