package commitment

import (
	"fmt"
	"math"
	"testing"
)

const (
	m5Large  = 0.096
	m5XLarge = 0.192
	c5Large  = 0.085
)

func instances(typ, zone, ct string, price float64, n int, prefix string) []Instance {
	var out []Instance
	for i := range n {
		out = append(out, Instance{ID: fmt.Sprintf("%s%02d", prefix, i), Type: typ, Zone: zone, CapacityType: ct, ListPrice: price})
	}
	return out
}

func join(lists ...[]Instance) []Instance {
	var out []Instance
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestApply(t *testing.T) {
	compute := SavingsPlan{ID: "sp-compute", Commitment: 1, Rates: map[string]float64{"m5.large": m5Large * 0.7, "c5.large": c5Large * 0.6}}
	cases := []struct {
		name      string
		c         Commitments
		in        []Instance
		want      map[string]float64 // effective price by ID (others: list)
		wantTotal float64
		wantLeft  map[string]float64
	}{{
		name:      "regional RIs cover on-demand of their type, not spot",
		c:         Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Count: 8}}},
		in:        join(instances("m5.large", "a", "on-demand", m5Large, 10, "od"), instances("m5.large", "a", "spot", 0.05, 2, "a-spot")),
		wantTotal: 2*m5Large + 2*0.05,
		wantLeft:  map[string]float64{"ri": 0},
	}, {
		name:      "a zonal RI covers its zone alone",
		c:         Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Zone: "b", Count: 1}}},
		in:        instances("m5.large", "a", "on-demand", m5Large, 1, "a"),
		want:      map[string]float64{"a00": m5Large},
		wantTotal: m5Large,
		wantLeft:  map[string]float64{"ri": 1},
	}, {
		name: "zonal RIs before regional ones",
		c: Commitments{ReservedInstances: []ReservedInstance{{ID: "regional", Type: "m5.large", Count: 1},
			{ID: "zonal", Type: "m5.large", Zone: "b", Count: 1}}},
		in:        join(instances("m5.large", "b", "on-demand", m5Large, 1, "b"), instances("m5.large", "c", "on-demand", m5Large, 1, "c")),
		wantTotal: 0,
	}, {
		name:      "reserved capacity is billed as on-demand",
		c:         Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Count: 1}}},
		in:        instances("m5.large", "a", "reserved", m5Large, 1, "r"),
		want:      map[string]float64{"r00": 0},
		wantTotal: 0,
	}, {
		name:      "size flexibility: an xlarge RI covers two large",
		c:         Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.xlarge", Count: 1}}},
		in:        instances("m5.large", "a", "on-demand", m5Large, 3, "l"),
		want:      map[string]float64{"l00": 0, "l01": 0, "l02": m5Large},
		wantTotal: m5Large,
	}, {
		name:      "size flexibility: a large RI covers half an xlarge",
		c:         Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Count: 1}}},
		in:        instances("m5.xlarge", "a", "on-demand", m5XLarge, 1, "x"),
		want:      map[string]float64{"x00": m5XLarge / 2},
		wantTotal: m5XLarge / 2,
	}, {
		name:      "smallest sizes first",
		c:         Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Count: 1}}},
		in:        join(instances("m5.2xlarge", "a", "on-demand", 2*m5XLarge, 1, "x"), instances("m5.large", "a", "on-demand", m5Large, 1, "l")),
		want:      map[string]float64{"l00": 0, "x00": 2 * m5XLarge},
		wantTotal: 2 * m5XLarge,
	}, {
		name:      "another family is not covered",
		c:         Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Count: 1}}},
		in:        instances("c5.large", "a", "on-demand", c5Large, 1, "c"),
		want:      map[string]float64{"c00": c5Large},
		wantTotal: c5Large,
	}, {
		name:      "metal RIs cover their own type, an instance each",
		c:         Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.metal", Count: 1}}},
		in:        join(instances("m5.metal", "a", "on-demand", 4.608, 2, "m"), instances("m5.large", "a", "on-demand", m5Large, 1, "l")),
		want:      map[string]float64{"m00": 0, "m01": 4.608, "l00": m5Large},
		wantTotal: 4.608 + m5Large,
	}, {
		name: "a Savings Plan covers at its rate until its commitment is used",
		c:    Commitments{SavingsPlans: []SavingsPlan{{ID: "sp", Commitment: 1, Rates: map[string]float64{"m5.large": m5Large * 0.7}}}},
		in:   instances("m5.large", "a", "on-demand", m5Large, 20, "od"),
		// 14 whole instances use 0.9408; the 15th is covered for
		// 0.0592/0.0672 of its hour; five pay list.
		want:      map[string]float64{"od00": m5Large * 0.7, "od13": m5Large * 0.7, "od14": 0.0592 + (1-0.0592/0.0672)*m5Large, "od15": m5Large},
		wantTotal: 1 + (1-0.0592/0.0672)*m5Large + 5*m5Large,
		wantLeft:  map[string]float64{"sp": 0},
	}, {
		name: "RIs before Savings Plans",
		c: Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Count: 8}},
			SavingsPlans: []SavingsPlan{{ID: "sp", Commitment: 1, Rates: map[string]float64{"m5.large": m5Large * 0.7}}}},
		in:        instances("m5.large", "a", "on-demand", m5Large, 10, "od"),
		wantTotal: 2 * m5Large * 0.7,
		wantLeft:  map[string]float64{"ri": 0, "sp": 1 - 2*m5Large*0.7},
	}, {
		name: "EC2 Instance plans before Compute plans",
		c: Commitments{SavingsPlans: []SavingsPlan{compute,
			{ID: "sp-ec2", EC2Instance: true, Commitment: m5Large * 0.6, Rates: map[string]float64{"m5.large": m5Large * 0.6}}}},
		in:        instances("m5.large", "a", "on-demand", m5Large, 1, "od"),
		want:      map[string]float64{"od00": m5Large * 0.6},
		wantTotal: m5Large * 0.6,
		wantLeft:  map[string]float64{"sp-ec2": 0, "sp-compute": 1},
	}, {
		name: "the deepest discount first",
		c: Commitments{SavingsPlans: []SavingsPlan{{ID: "sp", Commitment: m5Large * 0.6,
			Rates: map[string]float64{"m5.large": m5Large * 0.6, "c5.large": c5Large * 0.7}}}},
		in:        join(instances("m5.large", "a", "on-demand", m5Large, 1, "m"), instances("c5.large", "a", "on-demand", c5Large, 1, "c")),
		want:      map[string]float64{"m00": m5Large * 0.6, "c00": c5Large},
		wantTotal: m5Large*0.6 + c5Large,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Apply(tc.c, tc.in)
			for id, want := range tc.want {
				if !near(got.Effective[id], want) {
					t.Errorf("%s: effective %v, want %v", id, got.Effective[id], want)
				}
			}
			if !near(got.Total(), tc.wantTotal) {
				t.Errorf("total %v, want %v (%v)", got.Total(), tc.wantTotal, got.Effective)
			}
			for id, want := range tc.wantLeft {
				if !near(got.Left[id], want) {
					t.Errorf("left of %s %v, want %v", id, got.Left[id], want)
				}
			}
		})
	}
}

func TestRooms(t *testing.T) {
	c := Commitments{
		ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Count: 8}, {ID: "zonal", Type: "m5.large", Zone: "b", Count: 1},
			{ID: "metal", Type: "m5.metal", Count: 1}},
		SavingsPlans: []SavingsPlan{{ID: "sp", Commitment: 1, Rates: map[string]float64{"m5.large": 0.0672, "m5.xlarge": 0.1344, "c5.large": 0.09}}},
	}
	running := instances("m5.large", "a", "on-demand", m5Large, 6, "od")
	left := Apply(c, running)
	cases := []struct {
		name, typ, zone string
		list            float64
		want            []Room
	}{
		{"two regional RIs left (8 units), then the plan", "m5.large", "a", m5Large,
			[]Room{{ID: "ri", Left: 8, Takes: 4}, {ID: "sp", Left: 1, Takes: 0.0672, Price: 0.0672}}},
		{"the zonal RI in its zone", "m5.large", "b", m5Large,
			[]Room{{ID: "ri", Left: 8, Takes: 4}, {ID: "zonal", Left: 1, Takes: 1}, {ID: "sp", Left: 1, Takes: 0.0672, Price: 0.0672}}},
		{"an xlarge takes 8 units", "m5.xlarge", "a", m5XLarge,
			[]Room{{ID: "ri", Left: 8, Takes: 8}, {ID: "sp", Left: 1, Takes: 0.1344, Price: 0.1344}}},
		{"a 2xlarge does not fit the RIs' 8 units", "m5.2xlarge", "a", 2 * m5XLarge, nil},
		{"a metal RI covers its own type", "m5.metal", "a", 4.608, []Room{{ID: "metal", Left: 1, Takes: 1}}},
		{"a rate over list is no room", "c5.large", "a", c5Large, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Rooms(c, left, tc.typ, tc.zone, tc.list)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("rooms %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNormalization(t *testing.T) {
	for typ, want := range map[string]float64{"t3.nano": 0.25, "m5.large": 4, "m5.xlarge": 8, "m5.24xlarge": 192, "m5.metal": 0, "bogus": 0} {
		if got := Normalization(typ); got != want {
			t.Errorf("%s: %v, want %v", typ, got, want)
		}
	}
}

// What each instance saves when it goes: nothing while the RIs cover
// every on-demand instance; with more, each saves what the last one
// costs, whichever the bill's bookkeeping names covered.
func TestMarginal(t *testing.T) {
	ri := Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Count: 8}}}
	riAndPlan := Commitments{ReservedInstances: ri.ReservedInstances, SavingsPlans: []SavingsPlan{{ID: "sp", Commitment: 1, Rates: map[string]float64{"m5.large": 0.0672}}}}
	cases := []struct {
		name string
		c    Commitments
		in   []Instance
		want map[string]float64
	}{
		{name: "all covered by RIs", c: ri, in: instances("m5.large", "a", "on-demand", m5Large, 8, "od"), want: map[string]float64{"od00": 0, "od07": 0}},
		{name: "one more than the RIs: each saves list", c: ri, in: instances("m5.large", "a", "on-demand", m5Large, 9, "od"), want: map[string]float64{"od00": m5Large, "od08": m5Large}},
		{name: "within the plan: each saves the rate", c: riAndPlan, in: instances("m5.large", "a", "on-demand", m5Large, 10, "od"), want: map[string]float64{"od00": 0.0672, "od09": 0.0672}},
		{name: "spot saves its list price", c: riAndPlan, in: instances("m5.large", "a", "spot", 0.08, 1, "sp"), want: map[string]float64{"sp00": 0.08}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for id, want := range tc.want {
				if got := Savings(tc.c, tc.in)(map[string]bool{id: true}); !near(got, want) {
					t.Errorf("%s saves %v alone, want %v", id, got, want)
				}
			}
		})
	}
}

// Savings prices removals together: three of ten on-demand m5.large under
// 8 RIs save two list prices, not three (the RIs then cover the third's
// place); at the plan's rate, what goes together saves the rate each.
func TestSaving(t *testing.T) {
	ri := Commitments{ReservedInstances: []ReservedInstance{{ID: "ri", Type: "m5.large", Count: 8}}}
	riAndPlan := Commitments{ReservedInstances: ri.ReservedInstances, SavingsPlans: []SavingsPlan{{ID: "sp", Commitment: 1, Rates: map[string]float64{"m5.large": 0.0672}}}}
	ten := instances("m5.large", "a", "on-demand", m5Large, 10, "od")
	for _, tc := range []struct {
		name    string
		c       Commitments
		removed []string
		want    float64
	}{
		{name: "one of ten under 8 RIs", c: ri, removed: []string{"od00"}, want: m5Large},
		{name: "three of ten under 8 RIs", c: ri, removed: []string{"od00", "od01", "od02"}, want: 2 * m5Large},
		{name: "none", c: ri, want: 0},
		{name: "two within the plan", c: riAndPlan, removed: []string{"od00", "od09"}, want: 2 * 0.0672},
		{name: "at list prices", c: Commitments{}, removed: []string{"od00", "od01", "od02"}, want: 3 * m5Large},
	} {
		t.Run(tc.name, func(t *testing.T) {
			removed := map[string]bool{}
			for _, id := range tc.removed {
				removed[id] = true
			}
			if got := Savings(tc.c, ten)(removed); !near(got, tc.want) {
				t.Errorf("saves %v, want %v", got, tc.want)
			}
		})
	}
}
