package lpbound

import (
	"reflect"
	"testing"
)

// TestPatternsMemo: a remembered result is the result, and callers cannot
// change what the memo holds.
func TestPatternsMemo(t *testing.T) {
	kinds := []Kind{{Name: "small", Price: 1, Capacity: []float64{2, 4}}, {Name: "large", Price: 1.8, Capacity: []float64{4, 8}}}
	shapes := []Shape{{Name: "a", Count: 7, Request: []float64{1, 1}, Kinds: []int{0, 1}}, {Name: "b", Count: 3, Request: []float64{0.5, 3}, Kinds: []int{0, 1}}}
	cases := []struct {
		name     string
		opt      PatternOptions
		memoized bool
	}{
		{"plain", PatternOptions{}, true},
		{"with an oracle", PatternOptions{Knapsack: func([]float64, []KnapsackItem, float64) ([]int, error) { return nil, nil }}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first, err := Patterns(kinds, shapes, nil, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			want := copyResult(first)
			first.Patterns[0].Counts[0] = 99
			first.Use[0] = -1
			again, err := Patterns(kinds, shapes, nil, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again, want) {
				t.Errorf("second result %+v, want %+v", again, want)
			}
			again.Patterns[0].Counts[0] = 98
			third, _ := Patterns(kinds, shapes, nil, c.opt)
			if !reflect.DeepEqual(third, want) {
				t.Errorf("third result %+v, want %+v: a caller changed the memo", third, want)
			}
			_, held := memo.get(memoKey(kinds, shapes, nil, c.opt))
			if held != c.memoized {
				t.Errorf("memoized %v, want %v", held, c.memoized)
			}
			// Another count is another problem.
			other := append([]Shape(nil), shapes...)
			other[0].Count = 8
			if memoKey(kinds, other, nil, c.opt) == memoKey(kinds, shapes, nil, c.opt) && c.memoized {
				t.Error("two problems share a key")
			}
		})
	}
}
