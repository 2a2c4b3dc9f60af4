package cloudprovider

import (
	"context"
	"errors"
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
