package disruption

import (
	"context"
	"math"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

type billing struct {
	cloudprovider.CloudProvider
	prices map[string]float64
}

func (b billing) MarginalPrices(context.Context) (map[string]float64, error) { return b.prices, nil }

// A running node is priced at its offering's list price, never at a
// commitment's room (which prices another node the planner may launch);
// a provider that knows the bill prices it as the bill does.
func TestCandidatePrices(t *testing.T) {
	m5 := &cloudprovider.InstanceType{Name: "m5.large", Offerings: []cloudprovider.Offering{
		{Zone: "a", CapacityType: "on-demand", Price: 0.096, Available: true},
		{Zone: "a", CapacityType: "on-demand", Price: 0, Available: true, Room: cloudprovider.Room{ID: "ri-1", Left: 4, Takes: 4}},
	}}
	cases := []struct {
		name string
		it   *cloudprovider.InstanceType
		zone string
		want float64
	}{
		{name: "the list price, not the room's", it: m5, zone: "a", want: 0.096},
		{name: "an offering the pool no longer has", it: m5, zone: "b", want: math.Inf(1)},
		{name: "a type the pool no longer has", zone: "a", want: math.Inf(1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := listPrice(tc.it, tc.zone, "on-demand"); got != tc.want {
				t.Errorf("listPrice = %v, want %v", got, tc.want)
			}
		})
	}
	if got := (&Controller{CloudProvider: billing{prices: map[string]float64{"default-x": 0}}}).marginalPrices(context.Background()); len(got) != 1 || got["default-x"] != 0 {
		t.Errorf("effective prices %v, want the provider's", got)
	}
	if got := (&Controller{CloudProvider: nil}).marginalPrices(context.Background()); got != nil {
		t.Errorf("effective prices %v from a provider that does not bill, want none", got)
	}
}
