package aws

import (
	"context"
	"fmt"
	"math"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type fixedCommitments commitment.Commitments

func (f fixedCommitments) Get(context.Context) (commitment.Commitments, error) {
	return commitment.Commitments(f), nil
}

// claimOf is a NodeClaim of the class: launched (labelled) as typ in zone
// and capacity type ct, or, with launched false, still launching and
// pinned to them by its requirements.
func claimOf(name, typ, zone, ct string, launched bool) *v1.NodeClaim {
	nc := nodeClaim()
	nc.Name = name
	nc.Labels = map[string]string{v1.LabelNodePool: "default"}
	if launched {
		nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType] = typ, zone, ct
		nc.Status.ProviderID = "aws:///" + zone + "/i-" + name
		return nc
	}
	for k, v := range map[string]string{corev1.LabelInstanceTypeStable: typ, corev1.LabelTopologyZone: zone, v1.LabelCapacityType: ct} {
		nc.Spec.Requirements = append(nc.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
	}
	return nc
}

// Commitments are offered to the planner as rooms on the on-demand
// offerings, after the cluster's NodeClaims (a launching one pinned by
// its requirements too) have taken what the bill gives them; and the
// NodeClaims are priced as the bill prices them.
func TestCommitmentOfferings(t *testing.T) {
	m5 := itype("m5.large", "amd64", 2, 29, offering(zoneA, "on-demand", 0.096), offering(zoneA, "spot", 0.08))
	cm := fixedCommitments{ReservedInstances: []commitment.ReservedInstance{{ID: "ri-1", Type: "m5.large", Count: 8}},
		SavingsPlans: []commitment.SavingsPlan{{ID: "sp-1", Commitment: 1, Rates: map[string]float64{"m5.large": 0.0672}}}}
	objs := []client.Object{readyClass()}
	for i := range 6 {
		objs = append(objs, claimOf(fmt.Sprintf("od-%d", i), "m5.large", zoneA, "on-demand", true))
	}
	objs = append(objs, claimOf("launching", "m5.large", zoneA, "on-demand", false), claimOf("spot-0", "m5.large", zoneA, "spot", true),
		claimOf("reserved-0", "m5.large", zoneA, "reserved", true))
	cases := []struct {
		name        string
		commitments CommitmentReader
		wantRooms   string
		wantPrices  map[string]float64
		// wantUse is the bill's use of each commitment; wantEffective
		// a NodeClaim's effective price on it.
		wantUse       string
		wantEffective map[string]float64
	}{
		{name: "RIs and a plan", commitments: cm,
			// 8 NodeClaims on demand (one in a capacity reservation) take
			// the RIs' 32 units: no RI room is left.
			wantRooms: "sp-1 left 1 takes 0.0672 at $0.0672; ",
			// A node in a capacity reservation saves next to nothing when
			// it goes: the reservation is paid for.
			wantPrices: map[string]float64{"od-0": 0, "launching": 0, "spot-0": 0.08, "reserved-0": 0},
			wantUse:    "ri-1 reserved-instance 32/32; sp-1 savings-plan 0/1; ", wantEffective: map[string]float64{"od-0": 0, "spot-0": 0.08}},
		{name: "a plan alone", commitments: fixedCommitments{SavingsPlans: cm.SavingsPlans},
			// 7 on demand use 0.4704 of the plan's dollar; the reserved
			// node is priced as planning prices a reservation's.
			wantRooms:  "sp-1 left 0.5296 takes 0.0672 at $0.0672; ",
			wantPrices: map[string]float64{"od-0": 0.0672, "spot-0": 0.08, "reserved-0": 0.096 * reservedPriceFactor},
			wantUse:    "sp-1 savings-plan 0.4704/1; ", wantEffective: map[string]float64{"od-0": 0.0672, "launching": 0.0672, "spot-0": 0.08}},
		{name: "none", commitments: fixedCommitments{}, wantRooms: ""},
		{name: "no reader", wantRooms: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, kubeWith(t, objs...), &fakes{instanceTypes: &fakeInstanceTypes{types: []*cloudprovider.InstanceType{m5}}})
			p.opts.Commitments = tc.commitments
			out := p.withCommitments(context.Background(), []*cloudprovider.InstanceType{m5})
			rooms := ""
			for _, o := range out[0].Offerings {
				if o.Limited() {
					if o.CapacityType != "on-demand" || o.Zone != zoneA || !o.Available {
						t.Errorf("room offering %+v, want on-demand in %s", o, zoneA)
					}
					rooms += fmt.Sprintf("%s left %.4g takes %.4g at $%.4f; ", o.Room.ID, o.Room.Left, o.Room.Takes, o.Price)
				}
			}
			if rooms != tc.wantRooms {
				t.Errorf("rooms %q, want %q", rooms, tc.wantRooms)
			}
			if len(m5.Offerings) != 2 {
				t.Errorf("the shared type was changed: %d offerings", len(m5.Offerings))
			}
			bill, err := p.Bill(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			prices := map[string]float64{}
			if bill.Saving != nil {
				for name := range tc.wantPrices {
					prices[name] = bill.Saving([]string{name})
				}
			} else {
				prices = nil
			}
			if tc.wantPrices == nil && prices != nil {
				t.Errorf("effective prices %v without commitments, want none (list prices)", prices)
			}
			for name, want := range tc.wantPrices {
				if got, ok := prices[name]; !ok || math.Abs(got-want) > 1e-9 {
					t.Errorf("%s marginal $%v (%v), want $%v", name, got, ok, want)
				}
			}
			use := ""
			for _, u := range bill.Commitments {
				use += fmt.Sprintf("%s %s %.4g/%.4g; ", u.ID, u.Kind, u.Used, u.Total)
			}
			if use != tc.wantUse {
				t.Errorf("commitments' use %q, want %q", use, tc.wantUse)
			}
			for name, want := range tc.wantEffective {
				if got, ok := bill.Effective[name]; !ok || math.Abs(got-want) > 1e-9 {
					t.Errorf("%s effective $%v (%v), want $%v", name, got, ok, want)
				}
			}
		})
	}
}
