package provisioning

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// armingClock is a fake clock that reports each time the batcher arms a
// timer (creates or resets one), so the test moves time only once the
// batcher has taken in what came before: no sleeps, no real time.
type armingClock struct {
	*clocktesting.FakeClock
	armed chan struct{}
}

func (c *armingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.armed <- struct{}{}
	return armingTimer{Timer: t, armed: c.armed}
}

type armingTimer struct {
	clock.Timer
	armed chan struct{}
}

func (t armingTimer) Reset(d time.Duration) bool {
	active := t.Timer.Reset(d)
	t.armed <- struct{}{}
	return active
}

// waitArmed waits for the batcher to arm a timer. The context is only a
// guard, so that a batcher that never arms fails instead of hanging; it
// plays no part in the batcher's time, which is the fake clock's.
func (c *armingClock) waitArmed(ctx context.Context, t *testing.T, what string) {
	t.Helper()
	select {
	case <-c.armed:
	case <-ctx.Done():
		t.Fatalf("the batcher did not arm a timer: %s", what)
	}
}

func TestBatcher(t *testing.T) {
	const idle, max = time.Second, 10 * time.Second
	cases := []struct {
		name string
		// triggers at these offsets after the first
		triggers []time.Duration
		// wantAfter is when the batch must close
		wantAfter time.Duration
	}{
		{name: "idle closes a single trigger", wantAfter: time.Second},
		{name: "each trigger extends the idle window", triggers: []time.Duration{500 * time.Millisecond, 1200 * time.Millisecond}, wantAfter: 2200 * time.Millisecond},
		{name: "a trigger just before idle ends extends it", triggers: []time.Duration{900 * time.Millisecond}, wantAfter: 1900 * time.Millisecond},
		{name: "max caps a steady stream", triggers: func() []time.Duration {
			var ts []time.Duration
			for d := 500 * time.Millisecond; d < 20*time.Second; d += 500 * time.Millisecond {
				ts = append(ts, d)
			}
			return ts
		}(), wantAfter: max},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := &armingClock{FakeClock: clocktesting.NewFakeClock(start), armed: make(chan struct{})}
			b := NewBatcher(clk, idle, max)
			guard, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan bool, 1)
			b.Trigger()
			go func() { done <- b.Wait(context.Background()) }()
			clk.waitArmed(guard, t, "the max timer")
			clk.waitArmed(guard, t, "the idle timer")
			next := 0
			const step = 100 * time.Millisecond
			for elapsed := time.Duration(0); elapsed < 30*time.Second; elapsed += step {
				if next < len(tc.triggers) && tc.triggers[next] <= elapsed {
					b.Trigger()
					clk.waitArmed(guard, t, fmt.Sprintf("the idle timer again, for the trigger at %v", elapsed))
					next++
				}
				clk.Step(step)
				// Step fires due timers at once, and a fired timer leaves
				// the clock's waiters: fewer than the two armed ones means
				// the batch has closed at this instant.
				if clk.Waiters() == 2 {
					continue
				}
				if got := clk.Now().Sub(start); got != tc.wantAfter {
					t.Fatalf("batch closed after %v, want %v", got, tc.wantAfter)
				}
				select {
				case ok := <-done:
					if !ok {
						t.Fatal("Wait returned false for a closed batch")
					}
				case <-guard.Done():
					t.Fatal("Wait did not return when its timer fired")
				}
				return
			}
			t.Fatal("batch never closed")
		})
	}
}

// TestBatcherStops checks that Wait gives up when its context ends, with or
// without a batch open.
func TestBatcherStops(t *testing.T) {
	for _, open := range []bool{false, true} {
		clk := &armingClock{FakeClock: clocktesting.NewFakeClock(time.Now()), armed: make(chan struct{}, 2)}
		b := NewBatcher(clk, time.Second, 10*time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan bool, 1)
		if open {
			b.Trigger()
		}
		go func() { done <- b.Wait(ctx) }()
		if open {
			<-clk.armed
			<-clk.armed
		}
		cancel()
		if <-done {
			t.Fatalf("open=%v: Wait returned true after its context ended", open)
		}
	}
}
