package disruption

import "time"

// Consolidation may take a command that kube-scheduler could make leave a
// pod pending, when the savings exceed the cost of a node for such pods.
// When that happens CautionStrikes times within CautionPeriod, it takes no
// such risk for CautionPeriod: a plan kube-scheduler keeps not following
// must not repeat, each time stranding a pod and launching a node.
const (
	CautionStrikes = 3
	CautionPeriod  = time.Hour
	// StrikeWindow is how long after a risky command began a pod that goes
	// pending counts against it: about as long as a drain takes.
	StrikeWindow = 10 * time.Minute
)

// Caution remembers risky commands and the pods kube-scheduler left
// pending after them. Times are passed in, so it is pure.
type Caution struct {
	lastRisky, until time.Time
	strikes          []time.Time
}

// Risked records that a command kube-scheduler could leave pods pending
// from began at now.
func (c *Caution) Risked(now time.Time) { c.lastRisky = now.Truncate(time.Second) }

// Observe looks at a pod that went pending at since. It returns whether
// that is a strike (the first pod pending from the last risky command,
// within StrikeWindow of it), how many strikes are on record, and, when
// this strike made consolidation cautious, until when.
func (c *Caution) Observe(now, since time.Time) (strike bool, strikes int, cautiousUntil time.Time) {
	if c.lastRisky.IsZero() || since.Before(c.lastRisky) || !since.Before(c.lastRisky.Add(StrikeWindow)) {
		return false, len(c.strikes), time.Time{}
	}
	c.lastRisky = time.Time{}
	kept := c.strikes[:0]
	for _, s := range c.strikes {
		if now.Sub(s) < CautionPeriod {
			kept = append(kept, s)
		}
	}
	c.strikes = append(kept, now)
	n := len(c.strikes)
	if n >= CautionStrikes {
		c.until = now.Add(CautionPeriod)
		c.strikes = nil
		return true, n, c.until
	}
	return true, n, time.Time{}
}

// Cautious reports whether consolidation takes only riskless commands now.
func (c *Caution) Cautious(now time.Time) bool { return now.Before(c.until) }
