package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/clock"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

type failing struct {
	CloudProvider
	err error
}

func (f failing) Name() string { return "test" }
func (f failing) Create(context.Context, *v1.NodeClaim) (*v1.NodeClaim, error) {
	return nil, f.err
}
func (f failing) Delete(context.Context, *v1.NodeClaim) error { return f.err }

// TestInstrumented: each failed call is counted by kind.
func TestInstrumented(t *testing.T) {
	nc := &v1.NodeClaim{}
	nc.Labels = map[string]string{v1.LabelNodePool: "gpu"}
	tests := []struct {
		err  error
		kind string
	}{
		{&InsufficientCapacityError{Err: errors.New("none")}, "InsufficientCapacityError"},
		{&NodeClassNotReadyError{Err: errors.New("not ready")}, "NodeClassNotReadyError"},
		{&NodeClaimNotFoundError{ProviderID: "aws:///a/i-1"}, "NodeClaimNotFoundError"},
		{errors.New("boom"), "UnknownError"},
	}
	for _, tt := range tests {
		p := Instrumented(failing{err: tt.err}, clock.RealClock{})
		errs := testutil.ToFloat64(metrics.CloudProviderErrors.WithLabelValues("", "Create", "test", tt.kind))
		deletes := testutil.ToFloat64(metrics.CloudProviderErrors.WithLabelValues("", "Delete", "test", tt.kind))
		_, _ = p.Create(context.Background(), nc)
		_ = p.Delete(context.Background(), nc)
		if d := testutil.ToFloat64(metrics.CloudProviderErrors.WithLabelValues("", "Create", "test", tt.kind)) - errs; d != 1 {
			t.Errorf("%s: %v Create errors counted, want 1", tt.kind, d)
		}
		if d := testutil.ToFloat64(metrics.CloudProviderErrors.WithLabelValues("", "Delete", "test", tt.kind)) - deletes; d != 1 {
			t.Errorf("%s: %v Delete errors counted, want 1", tt.kind, d)
		}
	}
}

type billing struct {
	CloudProvider
	prices map[string]float64
}

func (b billing) Bill(context.Context) (Bill, error) {
	return Bill{Effective: b.prices}, nil
}

// The metrics wrapper keeps the provider's marginal prices visible to
// consolidation, and its bill to the cost metrics and the spend caps,
// which see providers through it.
func TestInstrumentedBills(t *testing.T) {
	cases := []struct {
		name string
		p    CloudProvider
		want map[string]float64
	}{
		{name: "a provider that bills", p: billing{prices: map[string]float64{"default-x": 0}}, want: map[string]float64{"default-x": 0}},
		{name: "one that does not", p: failing{}, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := Instrumented(tc.p, clock.RealClock{}).(Biller)
			if !ok {
				t.Fatal("the wrapped provider is not a Biller")
			}
			bill, err := b.Bill(context.Background())
			if err != nil || fmt.Sprint(bill.Effective) != fmt.Sprint(tc.want) {
				t.Errorf("effective prices %v (%v), want %v", bill.Effective, err, tc.want)
			}
		})
	}
}
