package disruption

import (
	"context"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

type billing struct {
	cloudprovider.CloudProvider
	saving func([]string) float64
}

func (b billing) Bill(context.Context) (cloudprovider.Bill, error) {
	return cloudprovider.Bill{Saving: b.saving}, nil
}

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
}

// Under commitments, a candidate saves what the bill saves when it goes,
// counting the NodeClaims already leaving as gone: two m5.large under one
// RI each save list alone, but once one is leaving the other saves
// nothing. A provider that does not bill leaves list prices.
func TestCandidateSavings(t *testing.T) {
	oneRI := func(names []string) float64 { return 0.096 * float64(min(len(names), 1)) }
	claims := []*v1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	for _, tc := range []struct {
		name    string
		p       cloudprovider.CloudProvider
		leaving string
		want    float64
		wantNil bool
	}{
		{name: "none leaving: list", p: billing{saving: oneRI}, want: 0.096},
		{name: "the other leaving: nothing", p: billing{saving: oneRI}, leaving: "a", want: 0},
		{name: "a provider that does not bill", wantNil: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{CloudProvider: tc.p}
			saving := c.saving(context.Background(), claims, nil, func(nc *v1.NodeClaim, _ *corev1.Node) bool { return nc.Name == tc.leaving })
			if tc.wantNil {
				if saving != nil {
					t.Fatal("savings from a provider that does not bill")
				}
				return
			}
			if got := saving([]string{"b"}); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("b saves $%v, want $%v", got, tc.want)
			}
		})
	}
}
