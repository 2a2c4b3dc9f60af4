package disruption

import (
	"fmt"
	"math"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/robfig/cron/v3"
)

// BudgetReasons are the reasons a pass keeps budgets for.
var BudgetReasons = []v1.DisruptionReason{v1.DisruptionReasonUnderutilized, v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted}

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
	for _, reason := range BudgetReasons {
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
// (the first of the smallest), with its window when it is scheduled; or a
// budget that cannot be read, which allows nothing. Empty when no budget
// applies. It leaves out the pool's counts, which change with every node:
// the reason is given in an event each time it changes.
func Binding(np *v1.NodePool, reason v1.DisruptionReason, count PoolCount, now time.Time) string {
	best, bestN := -1, math.MaxInt
	for i, b := range np.Spec.Disruption.Budgets {
		if len(b.Reasons) > 0 && !hasReason(b.Reasons, reason) {
			continue
		}
		active, err := Active(b, now)
		if err != nil {
			return fmt.Sprintf("budgets[%d] cannot be read (%v), and allows nothing until it is fixed", i, err)
		}
		if !active {
			continue
		}
		n, err := budgetNodes(b.Nodes, count.Total)
		if err != nil {
			return fmt.Sprintf("budgets[%d].nodes cannot be read (%v), and allows nothing until it is fixed", i, err)
		}
		if n < bestN {
			best, bestN = i, n
		}
	}
	if best < 0 {
		return ""
	}
	b := np.Spec.Disruption.Budgets[best]
	if b.Schedule == nil || b.Duration == nil {
		return fmt.Sprintf("budgets[%d] (nodes: %q)", best, b.Nodes)
	}
	from, until, open := window(*b.Schedule, b.Duration.Duration, now)
	note := fmt.Sprintf("budgets[%d] (nodes: %q, schedule: %q, duration: %s) is active from %s until %s", best, b.Nodes, *b.Schedule, b.Duration.Duration,
		from.Format(time.RFC3339), until.Format(time.RFC3339))
	if open {
		note += " at least (its windows overlap)"
	}
	return note
}

// windowSteps bounds how many schedule hits window follows.
const windowSteps = 1000

// window is the active period of a scheduled budget that is active at now:
// from the earliest schedule hit whose window covers now, until the end of
// the windows that follow without a gap. open reports that they overlap
// beyond windowSteps hits (an hourly schedule with a 3h duration never
// closes), until being then where the search stopped.
func window(schedule string, duration time.Duration, now time.Time) (from, until time.Time, open bool) {
	sched, err := cron.ParseStandard("TZ=UTC " + schedule)
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	now = now.UTC()
	from = sched.Next(now.Add(-duration))
	if from.IsZero() {
		return time.Time{}, time.Time{}, false
	}
	until = from.Add(duration)
	for range windowSteps {
		next := sched.Next(until.Add(-time.Nanosecond))
		if next.IsZero() || next.After(until) {
			return from, until, false
		}
		until = next.Add(duration)
	}
	return from, until, true
}
