package disruption

import (
	"fmt"
	"math"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/robfig/cron/v3"
)

// budgetReasons are the reasons a pass keeps budgets for, and the Options
// map each one's remaining count goes into.
var budgetReasons = []v1.DisruptionReason{v1.DisruptionReasonUnderutilized, v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted}

// SetBudgets fills opts' Allowed, AllowedEmpty and AllowedDrift with what
// each NodePool's budgets still allow at now, and records which budget
// binds, so that a node kept for its budget is told which one and, when it
// is scheduled, until when. The controller and the simulator both call it,
// so both read budgets alike. A pool whose budgets cannot be read allows
// nothing; its error is returned by pool name.
func (o *Options) SetBudgets(pools []*v1.NodePool, counts map[string]PoolCount, now time.Time) map[string]error {
	o.Allowed, o.AllowedEmpty, o.AllowedDrift = map[string]int{}, map[string]int{}, map[string]int{}
	o.BudgetNotes = map[v1.DisruptionReason]map[string]string{}
	errs := map[string]error{}
	for _, reason := range budgetReasons {
		into := map[v1.DisruptionReason]map[string]int{
			v1.DisruptionReasonUnderutilized: o.Allowed, v1.DisruptionReasonEmpty: o.AllowedEmpty, v1.DisruptionReasonDrifted: o.AllowedDrift,
		}[reason]
		o.BudgetNotes[reason] = map[string]string{}
		for _, np := range pools {
			n, err := Remaining(np, reason, counts[np.Name], now)
			if err != nil {
				errs[np.Name] = err
			}
			into[np.Name] = n
			o.BudgetNotes[reason][np.Name] = Binding(np, reason, counts[np.Name], now)
		}
	}
	return errs
}

// budgetReason is why a node of pool stays when its budget for reason is
// used up: Karpenter's words, then the budget that binds.
func (o Options) budgetReason(pool string, reason v1.DisruptionReason) string {
	why := fmt.Sprintf("the disruption budget of nodepool %q allows no more disruptions now", pool)
	if note := o.BudgetNotes[reason][pool]; note != "" {
		why += ": " + note
	}
	return why
}

// Binding names the budget that sets a NodePool's limit for reason at now
// (the first of the smallest), with its window when it is scheduled, and
// how many of the pool's nodes are disrupting already. Empty when no
// budget applies.
func Binding(np *v1.NodePool, reason v1.DisruptionReason, count PoolCount, now time.Time) string {
	best, bestN := -1, math.MaxInt
	for i, b := range np.Spec.Disruption.Budgets {
		if len(b.Reasons) > 0 && !hasReason(b.Reasons, reason) {
			continue
		}
		active, err := Active(b, now)
		if err != nil || !active {
			continue
		}
		n, err := budgetNodes(b.Nodes, count.Total)
		if err != nil {
			continue
		}
		if n < bestN {
			best, bestN = i, n
		}
	}
	if best < 0 {
		return ""
	}
	b := np.Spec.Disruption.Budgets[best]
	note := fmt.Sprintf("budgets[%d] (nodes: %q", best, b.Nodes)
	if b.Schedule != nil && b.Duration != nil {
		from, until := window(*b.Schedule, b.Duration.Duration, now)
		note += fmt.Sprintf(", schedule: %q, duration: %s) is active from %s until %s", *b.Schedule, b.Duration.Duration,
			from.Format(time.RFC3339), until.Format(time.RFC3339))
	} else {
		note += ")"
	}
	note += fmt.Sprintf(" and allows %d of the pool's %d node(s)", bestN, count.Total)
	if count.Disrupting > 0 {
		note += fmt.Sprintf(", %d of which are disrupting already", count.Disrupting)
	}
	return note
}

// window is the active window of a scheduled budget that is active at now:
// from its latest schedule hit at or before now, for duration.
func window(schedule string, duration time.Duration, now time.Time) (from, until time.Time) {
	sched, err := cron.ParseStandard("TZ=UTC " + schedule)
	if err != nil {
		return time.Time{}, time.Time{}
	}
	now = now.UTC()
	hit := sched.Next(now.Add(-duration))
	for next := sched.Next(hit); !next.After(now); next = sched.Next(hit) {
		hit = next
	}
	return hit, hit.Add(duration)
}
