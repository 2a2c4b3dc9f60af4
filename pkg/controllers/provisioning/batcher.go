// Package provisioning turns pending pods into NodeClaims: it batches pod
// events, asks the scheduling core for a plan and creates the plan's NodeClaims.
package provisioning

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Batcher gathers triggers into batches, so a Deployment scaled to 1,000
// replicas becomes one plan rather than a thousand.
type Batcher struct {
	trigger chan struct{}
	clock   clock.Clock
	idle    time.Duration
	max     time.Duration
}

// NewBatcher returns a batcher that closes a batch after idle without a new
// trigger, or after max in any case.
func NewBatcher(c clock.Clock, idle, max time.Duration) *Batcher {
	return &Batcher{trigger: make(chan struct{}, 1), clock: c, idle: idle, max: max}
}

// Trigger starts or extends a batch. It never blocks.
func (b *Batcher) Trigger() {
	select {
	case b.trigger <- struct{}{}:
	default:
	}
}

// Wait blocks until a batch has been gathered; it returns false when ctx ends.
func (b *Batcher) Wait(ctx context.Context) bool {
	select {
	case <-b.trigger:
	case <-ctx.Done():
		return false
	}
	maxTimer := b.clock.NewTimer(b.max)
	defer maxTimer.Stop()
	idle := b.clock.NewTimer(b.idle)
	defer idle.Stop()
	for {
		select {
		case <-b.trigger:
			if !idle.Stop() {
				select {
				case <-idle.C():
				default:
				}
			}
			idle.Reset(b.idle)
		case <-idle.C():
			return true
		case <-maxTimer.C():
			return true
		case <-ctx.Done():
			return false
		}
	}
}
