// Package batcher merges concurrent calls into one AWS request.
//
// A burst of NodeClaims launching, registering or terminating at once would
// otherwise cost one CreateFleet, DescribeInstances or TerminateInstances
// call each, and AWS throttles per account. Callers block until their batch
// has run, so each keeps a plain synchronous call.
package batcher

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

// Options shape the windows. A batch runs after Idle with no new request, or
// after Max since its first request, or when it holds MaxItems.
type Options struct {
	Idle, Max time.Duration
	MaxItems  int
	// Clock runs the windows; tests pass a fake one.
	Clock clock.WithDelayedExecution
	// Name labels the batcher's metrics (create_fleet, describe_instances,
	// terminate_instances, as Karpenter names its own).
	Name string
}

// Batcher groups requests by key and runs exec once per group.
type Batcher[K comparable, Req, Resp any] struct {
	opts Options
	// exec runs one batch and returns one result per request, in order.
	exec func(ctx context.Context, key K, reqs []Req) []Result[Resp]

	mu      sync.Mutex
	pending map[K]*batch[Req, Resp]
}

// Result is one request's answer.
type Result[Resp any] struct {
	Value Resp
	Err   error
}

type batch[Req, Resp any] struct {
	reqs    []Req
	waiters []chan Result[Resp]
	first   time.Time
	last    time.Time
	timer   clock.Timer
	ctx     context.Context
	closed  bool
}

// New returns a batcher. exec must return len(reqs) results.
func New[K comparable, Req, Resp any](opts Options, exec func(ctx context.Context, key K, reqs []Req) []Result[Resp]) *Batcher[K, Req, Resp] {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxItems <= 0 {
		opts.MaxItems = 500
	}
	return &Batcher[K, Req, Resp]{opts: opts, exec: exec, pending: map[K]*batch[Req, Resp]{}}
}

// Do adds req to the batch of key and waits for its result. The batch runs
// with a context detached from any one caller's cancellation (a caller that
// gives up must not fail the others' launch), but a caller whose context
// ends stops waiting.
func (b *Batcher[K, Req, Resp]) Do(ctx context.Context, key K, req Req) (Resp, error) {
	ch := make(chan Result[Resp], 1)
	b.mu.Lock()
	now := b.opts.Clock.Now()
	bt := b.pending[key]
	if bt == nil {
		bt = &batch[Req, Resp]{first: now, ctx: context.WithoutCancel(ctx)}
		b.pending[key] = bt
	}
	bt.reqs = append(bt.reqs, req)
	bt.waiters = append(bt.waiters, ch)
	bt.last = now
	if len(bt.reqs) >= b.opts.MaxItems {
		b.flushLocked(key, bt)
	} else {
		b.scheduleLocked(key, bt)
	}
	b.mu.Unlock()
	select {
	case r := <-ch:
		return r.Value, r.Err
	case <-ctx.Done():
		var zero Resp
		return zero, ctx.Err()
	}
}

// scheduleLocked (re)arms the batch's timer for the earlier of its idle and
// max deadlines.
func (b *Batcher[K, Req, Resp]) scheduleLocked(key K, bt *batch[Req, Resp]) {
	wait := b.opts.Idle
	if rest := bt.first.Add(b.opts.Max).Sub(bt.last); rest < wait {
		wait = rest
	}
	if wait < 0 {
		wait = 0
	}
	if bt.timer != nil {
		bt.timer.Stop()
	}
	bt.timer = b.opts.Clock.AfterFunc(wait, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.pending[key] == bt {
			// The timer has fired: stopping it again would deadlock a
			// fake clock, which runs this callback under its own lock.
			bt.timer = nil
			b.flushLocked(key, bt)
		}
	})
}

func (b *Batcher[K, Req, Resp]) flushLocked(key K, bt *batch[Req, Resp]) {
	if bt.closed {
		return
	}
	bt.closed = true
	delete(b.pending, key)
	if bt.timer != nil {
		bt.timer.Stop()
	}
	go func() {
		// Here, not under the lock: a fake clock runs flushLocked's timer
		// under its own lock, which reading it would take again.
		metrics.BatchTime.WithLabelValues(b.opts.Name).Observe(b.opts.Clock.Since(bt.first).Seconds())
		metrics.BatchSize.WithLabelValues(b.opts.Name).Observe(float64(len(bt.reqs)))
		results := b.exec(bt.ctx, key, bt.reqs)
		for i, ch := range bt.waiters {
			if i < len(results) {
				ch <- results[i]
			} else {
				ch <- Result[Resp]{Err: errShort}
			}
		}
	}()
}

type shortError struct{}

func (shortError) Error() string { return "batch returned fewer results than requests" }

var errShort error = shortError{}
