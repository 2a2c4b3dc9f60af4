package provisioning

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestBatcher(t *testing.T) {
	cases := []struct {
		name string
		// triggers at these offsets after the first
		triggers []time.Duration
		// wantAfter is when the batch must close
		wantAfter time.Duration
	}{
		{name: "idle closes a single trigger", wantAfter: time.Second},
		{name: "each trigger extends the idle window", triggers: []time.Duration{500 * time.Millisecond, 1200 * time.Millisecond}, wantAfter: 2200 * time.Millisecond},
		{name: "max caps a steady stream", triggers: func() []time.Duration {
			var ts []time.Duration
			for d := 500 * time.Millisecond; d < 20*time.Second; d += 500 * time.Millisecond {
				ts = append(ts, d)
			}
			return ts
		}(), wantAfter: 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(start)
			b := NewBatcher(clk, time.Second, 10*time.Second)
			done := make(chan time.Time, 1)
			b.Trigger()
			go func() {
				b.Wait(context.Background())
				done <- clk.Now()
			}()
			elapsed := time.Duration(0)
			next := 0
			for step := 100 * time.Millisecond; elapsed < 30*time.Second; elapsed += step {
				// Let the waiter arm its timers before time moves.
				for !clk.HasWaiters() {
					time.Sleep(time.Millisecond)
				}
				if next < len(tc.triggers) && tc.triggers[next] <= elapsed {
					b.Trigger()
					next++
					time.Sleep(5 * time.Millisecond)
				}
				clk.Step(step)
				select {
				case at := <-done:
					if got := at.Sub(start); got != tc.wantAfter {
						t.Fatalf("batch closed after %v, want %v", got, tc.wantAfter)
					}
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
			t.Fatal("batch never closed")
		})
	}
}
