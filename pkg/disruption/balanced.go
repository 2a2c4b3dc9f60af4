package disruption

import (
	"fmt"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// BalancedThreshold is the score a command needs under the Balanced
// consolidationPolicy: the share of the NodePool's cost it saves, divided
// by the share of the NodePool's pods it moves, must be at least 1/2. A
// command that saves 10% of the cost may move up to 20% of the pods.
// Karpenter v1.14 uses the same ratio and threshold with its eviction
// cost; Joiner counts each pod as one move.
const BalancedThreshold = 0.5

// poolTotals are a NodePool's cost and pods, the denominators of the score.
type poolTotals struct {
	price float64
	pods  int
}

func totalsByPool(snap scheduling.Snapshot, cands []Candidate) map[string]*poolTotals {
	out := map[string]*poolTotals{}
	for _, c := range cands {
		if out[c.NodePool] == nil {
			out[c.NodePool] = &poolTotals{}
		}
		out[c.NodePool].price += c.Price
	}
	for _, n := range snap.Nodes {
		if t := out[n.NodePool]; t != nil {
			for _, p := range n.Pods {
				if !pods.IsOwnedByNode(p) {
					t.pods++
				}
			}
		}
	}
	return out
}

// balanced says why a command fails the Balanced policy of its
// candidates' NodePools; empty when it passes or no pool is Balanced.
func balanced(snap scheduling.Snapshot, totals map[string]*poolTotals, policy map[string]v1.ConsolidationPolicy, cmd Command) string {
	pools := map[string]bool{}
	for _, c := range cmd.Candidates {
		if policy[c.NodePool] == v1.ConsolidationPolicyBalanced {
			pools[c.NodePool] = true
		}
	}
	if len(pools) == 0 {
		return ""
	}
	removed := map[string]bool{}
	for _, c := range cmd.Candidates {
		removed[c.Node] = true
	}
	moved := 0
	for _, g := range movingPods(snap, removed) {
		moved += len(g)
	}
	if moved == 0 {
		return ""
	}
	price, pods := 0.0, 0
	for name := range pools {
		price += totals[name].price
		pods += totals[name].pods
	}
	if price <= 0 || pods == 0 {
		return ""
	}
	saved, disrupted := cmd.Savings/price, float64(moved)/float64(pods)
	if score := saved / disrupted; score < BalancedThreshold {
		return fmt.Sprintf("consolidationPolicy is Balanced: it would save %.1f%% of the cost for moving %.1f%% of the pods (score %.2f, needs %.2f)", 100*saved, 100*disrupted, score, BalancedThreshold)
	}
	return ""
}
