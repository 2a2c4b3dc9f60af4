package state_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/state"
)

// TestPlanSlot: one plan at a time; a waiter gives up when its context
// ends and takes the slot when the holder gives it back, once however
// often the holder's done is called.
func TestPlanSlot(t *testing.T) {
	c := &state.Cluster{}
	done, err := c.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := waitBriefly(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a plan while the slot was held: %v, want context.DeadlineExceeded", err)
	}

	took := make(chan func(), 1)
	go func() {
		next, err := c.Plan(context.Background())
		if err != nil {
			t.Error(err)
		}
		took <- next
	}()
	done()
	done() // a second call gives back nothing more
	var next func()
	select {
	case next = <-took:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter never took the slot given back")
	}
	if err := waitBriefly(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a plan while the waiter held the slot: %v, want context.DeadlineExceeded", err)
	}
	next()
	if err := waitBriefly(c); err != nil {
		t.Fatalf("a plan once the slot was free: %v", err)
	}
}

// waitBriefly asks for the slot with a context that ends soon, and gives
// back what it got.
func waitBriefly(c *state.Cluster) error {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done, err := c.Plan(ctx)
	if err == nil {
		done()
	}
	return err
}
