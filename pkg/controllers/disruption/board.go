package disruption

import (
	"fmt"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/explain"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// record puts the pass's word on every node it saw on the Board: the
// command's move for its candidates, the reason each other candidate
// stays (the decision's, or that consolidateAfter has not passed), and
// why the nodes it did not weigh were left out (unweighed).
func (c *Controller) record(snap scheduling.Snapshot, infos []*candidateInfo, d disruption.Decision) {
	if c.Board == nil {
		return
	}
	pools := map[string]*v1.NodePool{}
	for _, p := range snap.NodePools {
		pools[p.NodePool.Name] = p.NodePool
	}
	moves := map[string]explain.Node{}
	for i, cmd := range d.Commands {
		verdict := explain.Movable
		if i == 0 {
			verdict = explain.Disrupting
		}
		for _, cand := range cmd.Candidates {
			moves[cand.Node] = explain.Node{Verdict: verdict, Reason: string(cmd.Reason), Move: moveOf(cmd), SavingPerHour: cmd.Savings}
		}
	}
	var out []explain.Node
	for _, info := range infos {
		n, moved := moves[info.cand.Node]
		switch {
		case moved:
		case d.Skipped[info.cand.Node] != "":
			n = explain.Node{Verdict: explain.Kept, Reason: d.Skipped[info.cand.Node]}
		case !info.cand.Consolidatable:
			n = explain.Node{Verdict: explain.Kept, Reason: notQuietYet(info.nc, pools[info.cand.NodePool])}
		default:
			// Decide stops at the first kind of move it finds: empty
			// nodes, then drift, then the rest.
			n = explain.Node{Verdict: explain.Kept, Reason: "not weighed this pass: another disruption went first"}
		}
		n.Node, n.NodeClaim, n.NodePool = info.cand.Node, info.cand.NodeClaim, info.cand.NodePool
		out = append(out, n)
	}
	for node, why := range c.unweighed {
		// A node whose command is underway keeps the move that started
		// it, until the command ends.
		if prev, ok := c.Board.Node(node); ok && why.underway && prev.Verdict == explain.Disrupting {
			out = append(out, prev)
			continue
		}
		out = append(out, explain.Node{Node: node, NodeClaim: why.nodeClaim, NodePool: why.nodePool, Verdict: explain.Kept, Reason: why.reason})
	}
	c.Board.Record(c.Clock.Now(), out)
}

// unweighedNode is why read left a NodeClaim's node out of the pass.
type unweighedNode struct {
	nodeClaim, nodePool, reason string
	underway                    bool
}

// moveOf says what a command does to its candidates.
func moveOf(cmd disruption.Command) string {
	move := "delete"
	if len(cmd.Replacements) > 0 {
		var with []string
		for _, r := range cmd.Replacements {
			with = append(with, fmt.Sprintf("%s (%s, %s)", r.InstanceType.Name, r.Offering.CapacityType, r.Offering.Zone))
		}
		move = "replace with " + strings.Join(with, ", ")
	}
	if n := len(cmd.Candidates); n > 1 {
		move += fmt.Sprintf(", together with %d other node(s)", n-1)
	}
	return move
}

// notQuietYet says when a node not yet Consolidatable will be: its pool's
// consolidateAfter after its pods last changed.
func notQuietYet(nc *v1.NodeClaim, pool *v1.NodePool) string {
	if pool == nil || pool.Spec.Disruption.ConsolidateAfter.Duration == nil {
		return "not consolidatable yet"
	}
	after := *pool.Spec.Disruption.ConsolidateAfter.Duration
	last := nc.Status.LastPodEventTime.Time
	if last.IsZero() {
		return fmt.Sprintf("consolidateAfter (%s) has not passed since the node initialized", after)
	}
	return fmt.Sprintf("consolidateAfter (%s) has not passed: its pods last changed at %s, so it may be consolidated from %s",
		after, last.UTC().Format(time.RFC3339), last.Add(after).UTC().Format(time.RFC3339))
}

// whyUnweighed says why read left a NodeClaim's node out of the pass.
func whyUnweighed(nc *v1.NodeClaim, node *corev1.Node, pooled, initialized, underway bool) string {
	switch {
	case nc.DeletionTimestamp != nil || node.DeletionTimestamp != nil:
		return "being deleted"
	case underway:
		return "a disruption command underway is removing or replacing it"
	case !initialized:
		return "not initialized: disruption waits for its NodeClaim's Initialized condition"
	case !pooled:
		return fmt.Sprintf("its NodePool %q is not among the cluster's NodePools", nc.Labels[v1.LabelNodePool])
	}
	return ""
}
