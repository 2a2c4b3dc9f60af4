package unavailable

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestExpiry(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		advance time.Duration
		want    bool
	}{
		{"fresh entry is out", DefaultTTL, 0, true},
		{"just before the TTL it is still out", DefaultTTL, DefaultTTL - time.Nanosecond, true},
		{"at the TTL it is back", DefaultTTL, DefaultTTL, false},
		{"long after it is back", DefaultTTL, time.Hour, false},
		{"a zero TTL means the default", 0, DefaultTTL - time.Second, true},
		{"a custom TTL", time.Minute, time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			c := New(clk, tc.ttl)
			c.MarkUnavailable("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity")
			clk.Step(tc.advance)
			if got := c.IsUnavailable("m5.large", "us-east-1a", "spot"); got != tc.want {
				t.Fatalf("IsUnavailable after %v = %v, want %v", tc.advance, got, tc.want)
			}
		})
	}
}

func TestKeyIsTheWholeOffering(t *testing.T) {
	c := New(clocktesting.NewFakeClock(time.Now()), DefaultTTL)
	c.MarkUnavailable("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity")
	for _, tc := range []struct {
		it, zone, ct string
		want         bool
	}{
		{"m5.large", "us-east-1a", "spot", true},
		{"m5.large", "us-east-1a", "on-demand", false},
		{"m5.large", "us-east-1b", "spot", false},
		{"m5.xlarge", "us-east-1a", "spot", false},
	} {
		if got := c.IsUnavailable(tc.it, tc.zone, tc.ct); got != tc.want {
			t.Errorf("IsUnavailable(%s, %s, %s) = %v, want %v", tc.it, tc.zone, tc.ct, got, tc.want)
		}
	}
	if got := c.Reason("m5.large", "us-east-1a", "spot"); got != "InsufficientInstanceCapacity" {
		t.Errorf("Reason = %q", got)
	}
	if got := c.Reason("m5.large", "us-east-1b", "spot"); got != "" {
		t.Errorf("Reason of an available offering = %q, want empty", got)
	}
}

func TestMarkingAgainRestartsTheTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := New(clk, DefaultTTL)
	c.MarkUnavailable("m5.large", "us-east-1a", "spot", "first")
	clk.Step(2 * time.Minute)
	c.MarkUnavailable("m5.large", "us-east-1a", "spot", "second")
	clk.Step(2 * time.Minute) // 4 minutes after the first mark, 2 after the second
	if !c.IsUnavailable("m5.large", "us-east-1a", "spot") {
		t.Fatal("a second mark did not restart the TTL")
	}
	if got := c.Reason("m5.large", "us-east-1a", "spot"); got != "second" {
		t.Errorf("Reason = %q, want the latest", got)
	}
	clk.Step(time.Minute)
	if c.IsUnavailable("m5.large", "us-east-1a", "spot") {
		t.Fatal("still out a full TTL after the last mark")
	}
}

func TestSeqNum(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := New(clk, DefaultTTL)
	steps := []struct {
		name    string
		do      func()
		changes bool
	}{
		{"nothing happened", func() {}, false},
		{"an entry added", func() { c.MarkUnavailable("a", "z", "spot", "") }, true},
		{"the same entry marked again", func() { c.MarkUnavailable("a", "z", "spot", "") }, false},
		{"a read", func() { c.IsUnavailable("a", "z", "spot") }, false},
		{"a second entry", func() { c.MarkUnavailable("b", "z", "spot", "") }, true},
		{"time passes within the TTL", func() { clk.Step(time.Minute) }, false},
		{"entries expire", func() { clk.Step(DefaultTTL) }, true},
		{"nothing left to expire", func() { clk.Step(DefaultTTL) }, false},
		{"an expired entry added back", func() { c.MarkUnavailable("a", "z", "spot", "") }, true},
	}
	prev := c.SeqNum()
	for _, s := range steps {
		s.do()
		got := c.SeqNum()
		if (got != prev) != s.changes {
			t.Errorf("%s: SeqNum %d -> %d, want changed=%v", s.name, prev, got, s.changes)
		}
		prev = got
	}
}

// TestLogsOutAndBack: an operator sees when an offering went out and when it
// is offered again, once each (a restarted TTL is not news).
func TestLogsOutAndBack(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	var lines []string
	c := New(clk, time.Minute).WithLog(funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}))
	c.MarkUnavailable("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity")
	c.MarkUnavailable("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity")
	clk.Step(59 * time.Second)
	c.IsUnavailable("m5.large", "us-east-1a", "spot")
	clk.Step(time.Second)
	c.IsUnavailable("m5.large", "us-east-1a", "spot")
	c.IsUnavailable("m5.large", "us-east-1a", "spot")
	want := []string{
		`"level"=0 "msg"="offering unavailable" "instance-type"="m5.large" "zone"="us-east-1a" "capacity-type"="spot" "reason"="InsufficientInstanceCapacity" "ttl"="1m0s"`,
		`"level"=0 "msg"="offering available again" "instance-type"="m5.large" "zone"="us-east-1a" "capacity-type"="spot" "reason"="InsufficientInstanceCapacity"`,
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("logged\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// A capacity type marked out takes every offering of it out, and only of it,
// until its TTL ends.
func TestCapacityTypeUnavailable(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := New(clk, DefaultTTL)
	before := c.SeqNum()
	c.MarkCapacityTypeUnavailable("spot", "AuthFailure.ServiceLinkedRoleCreationNotPermitted")
	if c.SeqNum() == before {
		t.Error("marking a capacity type out did not change the sequence number")
	}
	for _, tc := range []struct {
		it, zone, ct string
		want         bool
	}{{"m5.large", "us-east-1a", "spot", true}, {"c7g.xlarge", "us-east-1c", "spot", true}, {"m5.large", "us-east-1a", "on-demand", false}} {
		if got := c.IsUnavailable(tc.it, tc.zone, tc.ct); got != tc.want {
			t.Errorf("IsUnavailable(%s, %s, %s) = %v, want %v", tc.it, tc.zone, tc.ct, got, tc.want)
		}
	}
	if r := c.Reason("m5.large", "us-east-1a", "spot"); r != "AuthFailure.ServiceLinkedRoleCreationNotPermitted" {
		t.Errorf("reason %q", r)
	}
	clk.Step(DefaultTTL)
	if c.IsUnavailable("m5.large", "us-east-1a", "spot") {
		t.Error("spot still out after the TTL")
	}
}

// TestPlacementGroupScope: an offering out inside a placement group is out
// for that group's launches alone; one out for every launch is out in every
// group too.
func TestPlacementGroupScope(t *testing.T) {
	c := New(clocktesting.NewFakeClock(time.Now()), DefaultTTL)
	c.MarkUnavailableIn("pg-1", "c5n.18xlarge", "us-east-1a", "on-demand", "InsufficientInstanceCapacity")
	c.MarkUnavailable("m5.large", "us-east-1a", "on-demand", "InsufficientInstanceCapacity")
	for _, tc := range []struct {
		group, it string
		want      bool
	}{
		{"pg-1", "c5n.18xlarge", true},
		{"", "c5n.18xlarge", false},
		{"pg-2", "c5n.18xlarge", false},
		{"pg-1", "m5.large", true},
		{"", "m5.large", true},
	} {
		if got := c.IsUnavailableIn(tc.group, tc.it, "us-east-1a", "on-demand"); got != tc.want {
			t.Errorf("IsUnavailableIn(%q, %s) = %v, want %v", tc.group, tc.it, got, tc.want)
		}
	}
}
