package state

import (
	"context"
	"sync"
)

// planSlot lets one plan run at a time in a process. A snapshot of 1,700
// nodes and 10,000 pods and the search over it hold tens of megabytes while
// they run; when the provisioner and disruption planned at once, the
// controller held two of them and went over its 300 MiB limit
// (docs/benchmarks.md §7, run 3). Neither loses by waiting: a plan made
// while the other one's writes land would be made on a state about to
// change.
type planSlot struct {
	once sync.Once
	ch   chan struct{}
}

// Plan waits for this process's one plan slot, or for ctx to end. The
// caller holds it from its snapshot until it is done with the plan, and
// gives it back with done. A done context is reported even when the slot is
// free, so a shutdown never starts a plan.
func (c *Cluster) Plan(ctx context.Context) (done func(), err error) {
	c.plans.once.Do(func() { c.plans.ch = make(chan struct{}, 1) })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case c.plans.ch <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-c.plans.ch }) }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
