package overlay

import (
	"context"
	"fmt"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

type billing struct {
	cloudprovider.CloudProvider
	prices map[string]float64
}

func (b billing) Bill(context.Context) (cloudprovider.Bill, error) {
	return cloudprovider.Bill{Effective: b.prices}, nil
}

// With the NodeOverlay gate on, consolidation, the cost metrics and the
// spend caps see the provider through Decorate: its bill must show.
func TestDecoratedBills(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    cloudprovider.CloudProvider
		want map[string]float64
	}{
		{name: "a provider that bills", p: billing{prices: map[string]float64{"default-x": 0.01}}, want: map[string]float64{"default-x": 0.01}},
		{name: "one that does not", p: struct{ cloudprovider.CloudProvider }{}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := Decorate(tc.p, &Store{}).(cloudprovider.Biller)
			if !ok {
				t.Fatal("the decorated provider is not a Biller")
			}
			bill, err := b.Bill(context.Background())
			if err != nil || fmt.Sprint(bill.Effective) != fmt.Sprint(tc.want) {
				t.Errorf("effective prices %v (%v), want %v", bill.Effective, err, tc.want)
			}
		})
	}
}
