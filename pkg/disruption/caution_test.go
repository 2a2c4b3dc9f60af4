package disruption

import (
	"testing"
	"time"
)

func TestCaution(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var c Caution
	if strike, _, _ := c.Observe(t0, t0); strike {
		t.Fatal("a strike without a risky command")
	}
	for i := 1; i <= CautionStrikes; i++ {
		now := t0.Add(time.Duration(i) * time.Minute)
		c.Risked(now)
		if strike, _, _ := c.Observe(now, now.Add(-time.Second)); strike {
			t.Fatalf("strike %d: a pod pending since before the command counted", i)
		}
		strike, n, until := c.Observe(now.Add(time.Minute), now.Add(30*time.Second))
		if !strike || n != i {
			t.Fatalf("strike %d: got %v, %d strikes", i, strike, n)
		}
		if again, _, _ := c.Observe(now.Add(time.Minute), now.Add(40*time.Second)); again {
			t.Fatalf("strike %d: a second pod of the same command counted", i)
		}
		if cautious := c.Cautious(now.Add(time.Minute)); cautious != (i == CautionStrikes) || (i == CautionStrikes) == until.IsZero() {
			t.Fatalf("strike %d: cautious %v until %v", i, cautious, until)
		}
	}
	end := t0.Add(time.Duration(CautionStrikes+1)*time.Minute + CautionPeriod)
	if c.Cautious(end) {
		t.Fatal("still cautious after CautionPeriod")
	}
	// A pod pending long after the command does not count.
	c.Risked(end)
	if strike, _, _ := c.Observe(end.Add(StrikeWindow+time.Minute), end.Add(StrikeWindow)); strike {
		t.Fatal("a pod pending after StrikeWindow counted")
	}
}
