package batcher

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// queued waits until key's open batch holds n requests.
func queued[K comparable, Req, Resp any](t *testing.T, b *Batcher[K, Req, Resp], key K, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		bt := b.pending[key]
		got := 0
		if bt != nil {
			got = len(bt.reqs)
		}
		b.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("batch %v never held %d requests", key, n)
}

func TestBatching(t *testing.T) {
	cases := []struct {
		name      string
		step      time.Duration // how far the clock moves after all requests are queued
		maxItems  int
		requests  int
		wantCalls []int // sizes of the exec calls
		wantWait  bool  // requests still waiting after the step
	}{
		{name: "a burst becomes one call after the idle window", step: 100 * time.Millisecond, requests: 3, wantCalls: []int{3}},
		{name: "nothing runs before the idle window", step: 50 * time.Millisecond, requests: 3, wantWait: true},
		{name: "a full batch runs at once", step: 0, maxItems: 2, requests: 2, wantCalls: []int{2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			var mu sync.Mutex
			var calls []int
			b := New(Options{Idle: 100 * time.Millisecond, Max: time.Second, MaxItems: tc.maxItems, Clock: clk},
				func(_ context.Context, _ string, reqs []int) []Result[string] {
					mu.Lock()
					calls = append(calls, len(reqs))
					mu.Unlock()
					out := make([]Result[string], len(reqs))
					for i, r := range reqs {
						out[i] = Result[string]{Value: fmt.Sprint("answer ", r)}
					}
					return out
				})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			results := make(chan string, tc.requests)
			for i := 0; i < tc.requests; i++ {
				go func() {
					v, err := b.Do(ctx, "k", i)
					if err != nil {
						v = err.Error()
					}
					results <- v
				}()
				if tc.maxItems == 0 || i < tc.maxItems-1 {
					queued(t, b, "k", i+1)
				}
			}
			clk.Step(tc.step)
			if tc.wantWait {
				select {
				case v := <-results:
					t.Fatalf("a request was answered before its window closed: %q", v)
				default:
				}
				b.mu.Lock()
				open := len(b.pending["k"].reqs)
				b.mu.Unlock()
				if open != tc.requests {
					t.Fatalf("open batch holds %d requests, want %d", open, tc.requests)
				}
				return
			}
			seen := map[string]bool{}
			for i := 0; i < tc.requests; i++ {
				seen[<-results] = true
			}
			for i := 0; i < tc.requests; i++ {
				if !seen[fmt.Sprint("answer ", i)] {
					t.Fatalf("request %d got someone else's answer: %v", i, seen)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(calls) != fmt.Sprint(tc.wantCalls) {
				t.Fatalf("calls %v, want %v", calls, tc.wantCalls)
			}
		})
	}
}

func TestMaxWindowBoundsAKeptBusyBatch(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	done := make(chan int, 1)
	b := New(Options{Idle: 100 * time.Millisecond, Max: 250 * time.Millisecond, Clock: clk},
		func(_ context.Context, _ string, reqs []int) []Result[int] {
			done <- len(reqs)
			return make([]Result[int], len(reqs))
		})
	ctx := context.Background()
	// A request every 90ms keeps the idle window from ever closing; the max
	// window must end the batch at 250ms.
	for i := 0; i < 3; i++ {
		go b.Do(ctx, "k", i)
		queued(t, b, "k", i+1)
		clk.Step(90 * time.Millisecond)
	}
	select {
	case n := <-done:
		if n != 3 {
			t.Fatalf("batch of %d, want 3", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the max window did not end the batch")
	}
}
