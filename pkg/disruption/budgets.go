// Package disruption holds the pure parts of voluntary disruption: how many
// nodes a NodePool may disrupt now, and (later) which nodes to consolidate.
package disruption

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/robfig/cron/v3"
)

// Allowed returns how many of a NodePool's nodes may be disrupting at once
// for reason at now, given how many nodes the pool has: the minimum over the
// budgets that are active and apply to the reason. No applicable active
// budget means no limit (math.MaxInt). Percentages round up, as PDBs do, so
// 10% of 5 nodes allows 1. A budget whose schedule cannot be parsed allows
// nothing: when the user's intent is unclear, disrupting is the wrong guess.
func Allowed(np *v1.NodePool, reason v1.DisruptionReason, nodes int, now time.Time) (int, error) {
	allowed := math.MaxInt
	for i, b := range np.Spec.Disruption.Budgets {
		if len(b.Reasons) > 0 && !hasReason(b.Reasons, reason) {
			continue
		}
		active, err := Active(b, now)
		if err != nil {
			return 0, fmt.Errorf("spec.disruption.budgets[%d]: %w", i, err)
		}
		if !active {
			continue
		}
		n, err := budgetNodes(b.Nodes, nodes)
		if err != nil {
			return 0, fmt.Errorf("spec.disruption.budgets[%d].nodes: %w", i, err)
		}
		if n < allowed {
			allowed = n
		}
	}
	return allowed, nil
}

func hasReason(rs []v1.DisruptionReason, r v1.DisruptionReason) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// Active reports whether a budget applies at now: always without a
// schedule, otherwise when the last schedule hit is at most duration ago.
// Schedules are in UTC.
func Active(b v1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil && b.Duration == nil {
		return true, nil
	}
	if b.Schedule == nil || b.Duration == nil {
		return false, fmt.Errorf("schedule and duration must be set together")
	}
	sched, err := cron.ParseStandard("TZ=UTC " + *b.Schedule)
	if err != nil {
		return false, fmt.Errorf("invalid schedule %q: %w", *b.Schedule, err)
	}
	now = now.UTC()
	next := sched.Next(now.Add(-b.Duration.Duration))
	if next.IsZero() {
		// cron finds no time in the next five years, such as for
		// "0 0 30 2 *" (February 30th). Karpenter reads the zero time as
		// a hit and the budget as always active; it is the schedule that
		// is wrong.
		return false, fmt.Errorf("schedule %q never fires; give one that does, such as \"0 9 * * mon-fri\"", *b.Schedule)
	}
	return !next.After(now), nil
}

// Validate checks every budget of np as a pass reads it, whatever the
// time and reason: its schedule and its nodes. A budget that cannot be
// read allows nothing, so the simulator refuses it at the start.
func Validate(np *v1.NodePool, now time.Time) error {
	for i, b := range np.Spec.Disruption.Budgets {
		if _, err := Active(b, now); err != nil {
			return fmt.Errorf("spec.disruption.budgets[%d]: %w", i, err)
		}
		if _, err := budgetNodes(b.Nodes, 0); err != nil {
			return fmt.Errorf("spec.disruption.budgets[%d].nodes: %w", i, err)
		}
	}
	return nil
}

func budgetNodes(value string, total int) (int, error) {
	if pct, ok := strings.CutSuffix(value, "%"); ok {
		p, err := strconv.Atoi(pct)
		if err != nil || p < 0 || p > 100 {
			return 0, fmt.Errorf("invalid percentage %q", value)
		}
		return int(math.Ceil(float64(total) * float64(p) / 100)), nil
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid node count %q", value)
	}
	return n, nil
}

// BudgetNode is one of a NodePool's NodeClaims as budget accounting sees it.
type BudgetNode struct {
	NodePool string
	// Initialized: the NodeClaim is Initialized and its Node exists.
	Initialized bool
	// Ready is the Node's Ready condition.
	Ready bool
	// MarkedForDeletion: the NodeClaim or Node is being deleted, or a
	// disruption command holds it (DisruptionReason, disrupted taint).
	MarkedForDeletion bool
	// InstanceTerminating: the NodeClaim's instance is being terminated;
	// it is as good as gone.
	InstanceTerminating bool
}

// PoolCount is what a NodePool's budgets are applied to.
type PoolCount struct {
	// Total counts the pool's initialized nodes whose instance is not
	// terminating: percentages are of these.
	Total int
	// Disrupting counts those that are NotReady or marked for deletion:
	// each uses up one disruption of the budget.
	Disrupting int
}

// CountBudgets counts each NodePool's nodes as Karpenter does. Only
// initialized nodes count: a replacement still launching would otherwise
// round a percentage up and let more running nodes go than intended. A
// NotReady node counts as disrupting, as it serves no pods either.
func CountBudgets(nodes []BudgetNode) map[string]PoolCount {
	out := map[string]PoolCount{}
	for _, n := range nodes {
		if n.NodePool == "" || !n.Initialized || n.InstanceTerminating {
			continue
		}
		c := out[n.NodePool]
		c.Total++
		if !n.Ready || n.MarkedForDeletion {
			c.Disrupting++
		}
		out[n.NodePool] = c
	}
	return out
}

// Remaining is how many more of a NodePool's nodes may begin disrupting for
// reason at now: what its budgets allow for the pool's count, less the
// nodes already disrupting, never below zero.
func Remaining(np *v1.NodePool, reason v1.DisruptionReason, count PoolCount, now time.Time) (int, error) {
	n, err := Allowed(np, reason, count.Total, now)
	if err != nil {
		return 0, err
	}
	return max(n-count.Disrupting, 0), nil
}
