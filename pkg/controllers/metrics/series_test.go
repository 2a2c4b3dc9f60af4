package metrics

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

func TestSeriesShareTheirPairs(t *testing.T) {
	f := newFamily("test_gauge", "A test.", "zone", "name", "arch")
	lp := pairs{}
	var got [2]dto.Metric
	for i, name := range []string{"a", "b"} {
		if err := f.series(lp, float64(i), "us-east-1a", name, "amd64").Write(&got[i]); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		// at is the label's place once sorted by name.
		at     int
		shared bool
	}{
		{name: "arch", at: 0, shared: true},
		{name: "name", at: 1, shared: false},
		{name: "zone", at: 2, shared: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := got[0].Label[tc.at], got[1].Label[tc.at]
			if a.GetName() != tc.name || b.GetName() != tc.name {
				t.Fatalf("label %d is %q and %q, want %q: labels must be sorted by name", tc.at, a.GetName(), b.GetName(), tc.name)
			}
			if (a == b) != tc.shared {
				t.Errorf("the two series share the %s pair: %t, want %t", tc.name, a == b, tc.shared)
			}
		})
	}
	if got[0].GetGauge().GetValue() != 0 || got[1].GetGauge().GetValue() != 1 {
		t.Errorf("values %v and %v, want 0 and 1", got[0].GetGauge().GetValue(), got[1].GetGauge().GetValue())
	}
}
