package cloudprovider

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

// Instrumented wraps a provider with Karpenter's karpenter_cloudprovider_*
// call metrics: every call's duration and every failure by kind. The
// launch and termination failures are the AWS provider's to count, per
// offering and per instance (pkg/cloudprovider/aws/instance).
func Instrumented(p CloudProvider, clk clock.PassiveClock) CloudProvider {
	return &instrumented{CloudProvider: p, clock: clk}
}

type instrumented struct {
	CloudProvider
	clock clock.PassiveClock
}

// errorKind is the error label: the provider error's type, as Karpenter
// names its own, or "" for none.
func errorKind(err error) string {
	var ice *InsufficientCapacityError
	var notReady *NodeClassNotReadyError
	var notFound *NodeClaimNotFoundError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ice):
		return "InsufficientCapacityError"
	case errors.As(err, &notReady):
		return "NodeClassNotReadyError"
	case errors.As(err, &notFound):
		return "NodeClaimNotFoundError"
	}
	return "UnknownError"
}

func (p *instrumented) observe(method string, start time.Time, err error) {
	name := p.CloudProvider.Name()
	metrics.CloudProviderDuration.WithLabelValues("", method, name).Observe(p.clock.Since(start).Seconds())
	if err != nil {
		metrics.CloudProviderErrors.WithLabelValues("", method, name, errorKind(err)).Inc()
	}
}

func (p *instrumented) Create(ctx context.Context, nc *v1.NodeClaim) (_ *v1.NodeClaim, err error) {
	defer func(start time.Time) { p.observe("Create", start, err) }(p.clock.Now())
	return p.CloudProvider.Create(ctx, nc)
}

func (p *instrumented) Delete(ctx context.Context, nc *v1.NodeClaim) (err error) {
	defer func(start time.Time) { p.observe("Delete", start, err) }(p.clock.Now())
	return p.CloudProvider.Delete(ctx, nc)
}

func (p *instrumented) Get(ctx context.Context, providerID string) (_ *v1.NodeClaim, err error) {
	defer func(start time.Time) { p.observe("Get", start, err) }(p.clock.Now())
	return p.CloudProvider.Get(ctx, providerID)
}

func (p *instrumented) List(ctx context.Context) (_ []*v1.NodeClaim, err error) {
	defer func(start time.Time) { p.observe("List", start, err) }(p.clock.Now())
	return p.CloudProvider.List(ctx)
}

func (p *instrumented) InstanceTypes(ctx context.Context, np *v1.NodePool) (_ []*InstanceType, err error) {
	defer func(start time.Time) { p.observe("GetInstanceTypes", start, err) }(p.clock.Now())
	return p.CloudProvider.InstanceTypes(ctx, np)
}

func (p *instrumented) IsDrifted(ctx context.Context, nc *v1.NodeClaim) (_ string, err error) {
	defer func(start time.Time) { p.observe("IsDrifted", start, err) }(p.clock.Now())
	return p.CloudProvider.IsDrifted(ctx, nc)
}

// Bill passes the wrapped provider's through (Biller), so that
// consolidation, the cost metrics and the spend caps see it through the
// metrics; the zero Bill when it has none.
func (p *instrumented) Bill(ctx context.Context) (Bill, error) {
	if b, ok := p.CloudProvider.(Biller); ok {
		return b.Bill(ctx)
	}
	return Bill{}, nil
}
