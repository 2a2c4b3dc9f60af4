package viewer

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/pricing"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
)

// EC2 nodes are priced on the bill too when the account has commitments:
// the header gives list and effective $/h, the footer what each commitment
// has in use and idle. Three on-demand m5.large under one RI and a $0.10/h
// plan at 0.0672: one free, the plan's dollar covers 1.49 of the other two,
// the rest at list.
func TestCommitmentsInTheViewer(t *testing.T) {
	catalog := pricing.New(pricing.Options{Region: "us-east-1", Isolated: true})
	list, _ := catalog.OnDemand("m5.large")
	cm := commitment.Commitments{
		ReservedInstances: []commitment.ReservedInstance{{ID: "ri-1", Type: "m5.large", Count: 1}},
		SavingsPlans:      []commitment.SavingsPlan{{ID: "sp-1", Commitment: 0.10, Rates: map[string]float64{"m5.large": 0.0672}}},
	}
	covered := 0.10 / 0.0672
	effective := covered*0.0672 + (2-covered)*list
	for _, tc := range []struct {
		name        string
		commitments CommitmentsFunc
		wantHeader  []string
		wantFooter  []string
		wantNone    bool
	}{
		{name: "an RI and a plan", commitments: func(string) (commitment.Commitments, error) { return cm, nil },
			wantHeader: []string{dollars(3*list, 4) + "/hour list", dollars(effective, 4) + "/hour effective"},
			wantFooter: []string{"RI m5.large ×1 (regional): 1 in use, 0 idle", "Compute Savings Plan $0.10/h: $0.1000/h in use, $0.0000/h idle"}},
		{name: "none", commitments: func(string) (commitment.Commitments, error) { return commitment.Commitments{}, nil }, wantNone: true},
		{name: "no reader", wantNone: true},
		{name: "a read that fails", commitments: func(string) (commitment.Commitments, error) { return commitment.Commitments{}, errors.New("denied") },
			wantNone: true, wantFooter: []string{"us-east-1: not read (denied)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := mixedCluster()
			in.Nodes = nil
			in.NodeClaims = nil
			in.Pods = nil
			for i := range 3 {
				in.Nodes = append(in.Nodes, kwokNode(nodeSpec{name: fmt.Sprintf("i-%d", i), itype: "m5.large", ct: "on-demand", zone: "us-east-1a", pool: "default", ready: true, aws: true}))
			}
			prices := &Prices{AWS: func(string) (*pricing.Provider, string) { return catalog, "aws nodes: catalog" }, Commitments: tc.commitments}
			s := Build(in, Options{}, prices, nil)
			screen := Render(s, View{}, 200, PlainStyle())
			header := strings.SplitN(screen, "\n", 2)[0]
			for _, want := range tc.wantHeader {
				if !strings.Contains(header, want) {
					t.Errorf("header %q lacks %q", header, want)
				}
			}
			for _, want := range tc.wantFooter {
				if !strings.Contains(screen, want) {
					t.Errorf("screen lacks %q:\n%s", want, screen)
				}
			}
			if tc.wantNone && (strings.Contains(header, "effective") || math.Abs(s.EffectivePerHour-s.PricePerHour) > 1e-9) {
				t.Errorf("no commitments, yet an effective price: %q", header)
			}
		})
	}
}
