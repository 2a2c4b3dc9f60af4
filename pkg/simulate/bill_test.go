package simulate

import (
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
)

// TestOnTheBill: with the account's commitments, plans fill them first,
// the run's cost is the bill's and its bound stays below it; without, the
// bill is the list.
func TestOnTheBill(t *testing.T) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ri := commitment.Commitments{ReservedInstances: []commitment.ReservedInstance{{ID: "ri-0", Type: "m5.xlarge", Count: 6}}}
	sp := commitment.Commitments{SavingsPlans: []commitment.SavingsPlan{{ID: "sp-0", Commitment: 0.5, Rates: commitment.DiscountedRates(its, 0.3, "")}}}
	// m5s is how many m5 nodes run at minute 30, when 40 pods do.
	m5s := func(r *Result) int {
		n := 0
		for typ, count := range r.Samples[30].ByType {
			if strings.HasPrefix(typ, "m5.") {
				n += count
			}
		}
		return n
	}
	cases := []struct {
		name  string
		cm    *commitment.Commitments
		check func(t *testing.T, r *Result)
	}{{
		name: "list prices",
		check: func(t *testing.T, r *Result) {
			if r.Summary.TotalCost != r.Summary.ListCost {
				t.Errorf("without commitments the bill $%.4f is not the list $%.4f", r.Summary.TotalCost, r.Summary.ListCost)
			}
		},
	}, {
		name: "Reserved Instances are filled first and cost nothing more",
		cm:   &ri,
		check: func(t *testing.T, r *Result) {
			// A node the RIs cover saves nothing when it goes: replacing
			// it with a cheaper uncovered one, and then the room it
			// leaves with another covered one, would never end.
			if r.Summary.NodesLaunched > 2*r.Summary.PeakNodes {
				t.Errorf("%d nodes launched for a peak of %d: consolidation churns under the RIs", r.Summary.NodesLaunched, r.Summary.PeakNodes)
			}
			if m5s(r) == 0 {
				t.Errorf("no m5 node runs beside the m5.xlarge RIs: %v", r.Samples[30].ByType)
			}
			// Six m5.xlarge an hour at list is what the RIs take off at
			// most; the run must get a good part of it.
			if saved := r.Summary.ListCost - r.Summary.TotalCost; saved < 0.192*6*0.5 {
				t.Errorf("the RIs saved $%.4f of $%.4f at list", saved, r.Summary.ListCost)
			}
		},
	}, {
		name: "a Savings Plan's rate is what its nodes cost",
		cm:   &sp,
		check: func(t *testing.T, r *Result) {
			// $0.50 of commitment at 30% off covers $0.71 of list an hour;
			// the bill saves $0.21 an hour of it, over three hours.
			if saved := r.Summary.ListCost - r.Summary.TotalCost; saved < 0.2 || saved > 0.5/0.7*0.3*3+1e-6 {
				t.Errorf("the plan saved $%.4f on the bill, want about $0.6", saved)
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Run(Config{Name: "test", Objects: scenario{}.objects(t), InstanceTypes: its, Timing: DefaultTiming(), Commitments: c.cm}, upAndDown(), nil)
			if err != nil {
				t.Fatal(err)
			}
			s := res.Summary
			if s.TotalCost < s.LPBoundCost-1e-6 {
				t.Errorf("the bill $%.4f is below its lower bound $%.4f", s.TotalCost, s.LPBoundCost)
			}
			if s.TotalCost > s.ListCost+1e-6 {
				t.Errorf("the bill $%.4f is above the list $%.4f", s.TotalCost, s.ListCost)
			}
			c.check(t, res)
		})
	}
}

// TestSpendCap: a NodePool's joiner.sh/hourly-spend-cap holds across
// batches, counting what nodes cost on the bill: Reserved Instances let
// more run under the same cap.
func TestSpendCap(t *testing.T) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Three batches, each of which alone fits under the cap.
	steps := &Trace{Duration: d(time.Hour), Events: []Event{
		{At: d(0), Scale: &Scale{Deployment: "web", Replicas: 6}},
		{At: d(10 * time.Minute), Scale: &Scale{Deployment: "web", Replicas: 12}},
		{At: d(20 * time.Minute), Scale: &Scale{Deployment: "web", Replicas: 24}},
	}}
	const cap = 1.0
	sc := scenario{extra: ""}
	ri := commitment.Commitments{ReservedInstances: []commitment.ReservedInstance{{ID: "ri-0", Type: "m5.xlarge", Count: 4}}}
	cases := []struct {
		name        string
		cm          *commitment.Commitments
		wantPending bool
	}{
		{name: "at list prices the cap leaves pods pending", wantPending: true},
		{name: "nodes the RIs cover cost the cap nothing", cm: &ri},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := sc.objects(t)
			objs.NodePools[0].Annotations = map[string]string{"joiner.sh/hourly-spend-cap": "1.00"}
			res, err := Run(Config{Name: "test", Objects: objs, InstanceTypes: its, Timing: DefaultTiming(), Commitments: c.cm}, steps, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, sm := range res.Samples {
				if sm.CostPerHour > cap+1e-9 {
					t.Fatalf("minute %.0f: the nodes cost $%.4f/h, over the cap of $%.2f/h", sm.Minutes, sm.CostPerHour, cap)
				}
			}
			last := res.Samples[len(res.Samples)-1]
			if (last.Pending > 0) != c.wantPending {
				t.Errorf("%d pods pending at the end (%d nodes, $%.4f/h on the bill, $%.4f/h at list), want pending: %v",
					last.Pending, last.Nodes, last.CostPerHour, last.ListPerHour, c.wantPending)
			}
		})
	}
}
