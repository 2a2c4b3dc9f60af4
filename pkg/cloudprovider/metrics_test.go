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

// TestInstrumented: each failed call is counted by kind; a failed launch by
// NodePool and reason; a terminated instance's NotFound is no termination
// failure.
func TestInstrumented(t *testing.T) {
	nc := &v1.NodeClaim{}
	nc.Labels = map[string]string{v1.LabelNodePool: "gpu"}
	tests := []struct {
		err          error
		kind         string
		terminations float64
	}{
		{&InsufficientCapacityError{Err: errors.New("none")}, "InsufficientCapacityError", 1},
		{&NodeClassNotReadyError{Err: errors.New("not ready")}, "NodeClassNotReadyError", 1},
		{&NodeClaimNotFoundError{ProviderID: "aws:///a/i-1"}, "NodeClaimNotFoundError", 0},
		{errors.New("boom"), "UnknownError", 1},
	}
	for _, tt := range tests {
		p := Instrumented(failing{err: tt.err}, clock.RealClock{})
		launches := testutil.ToFloat64(metrics.InstanceLaunchFailures.WithLabelValues("gpu", tt.kind))
		errs := testutil.ToFloat64(metrics.CloudProviderErrors.WithLabelValues("", "Create", "test", tt.kind))
		terms := testutil.ToFloat64(metrics.InstanceTerminationFailures.WithLabelValues("test"))
		_, _ = p.Create(context.Background(), nc)
		_ = p.Delete(context.Background(), nc)
		if d := testutil.ToFloat64(metrics.InstanceLaunchFailures.WithLabelValues("gpu", tt.kind)) - launches; d != 1 {
			t.Errorf("%s: %v launch failures counted, want 1", tt.kind, d)
		}
		if d := testutil.ToFloat64(metrics.CloudProviderErrors.WithLabelValues("", "Create", "test", tt.kind)) - errs; d != 1 {
			t.Errorf("%s: %v Create errors counted, want 1", tt.kind, d)
		}
		if d := testutil.ToFloat64(metrics.InstanceTerminationFailures.WithLabelValues("test")) - terms; d != tt.terminations {
			t.Errorf("%s: %v termination failures counted, want %v", tt.kind, d, tt.terminations)
		}
	}
}
