package disruption

import (
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// Decide is one round of voluntary disruption, in Karpenter's order: empty
// nodes quiet for consolidateAfter, then drifted nodes of static pools and
// of the others, then consolidation of the candidates that have been quiet
// for consolidateAfter. Every candidate left alone gets one reason, so
// "why not?" does not flip between two answers.
func Decide(snap scheduling.Snapshot, cands []Candidate, opts Options) Decision {
	if opts.Policy == nil {
		opts.Policy = map[string]v1.ConsolidationPolicy{}
		for _, p := range snap.NodePools {
			opts.Policy[p.NodePool.Name] = p.NodePool.Spec.Disruption.ConsolidationPolicy
		}
	}
	// A static pool's nodes are replaced when drifted, one for one, and
	// never consolidated: its count is its owner's.
	static := map[string]bool{}
	for _, p := range snap.Static {
		static[p.NodePool.Name] = true
	}
	var dynamic, ofStatic []Candidate
	for _, c := range cands {
		if static[c.NodePool] {
			ofStatic = append(ofStatic, c)
		} else {
			dynamic = append(dynamic, c)
		}
	}
	cands = dynamic
	never := map[string]bool{}
	for _, p := range snap.NodePools {
		never[p.NodePool.Name] = p.NodePool.Spec.Disruption.ConsolidateAfter.IsNever()
	}
	// Empty nodes first, as Karpenter's emptiness runs first: deleting
	// them needs no replacement and moves no pod, and a drift's pods would
	// otherwise land on them only to move again.
	busy := busyNodes(snap)
	var empty []Candidate
	for _, c := range cands {
		// The blocked ones too, to say why they stay.
		if !busy[c.Node] && (c.Blocked != "" || (c.Consolidatable && !never[c.NodePool])) {
			empty = append(empty, c)
		}
	}
	if len(empty) > 0 {
		if d := Consolidate(snap, empty, opts); len(d.Commands) > 0 && d.Commands[0].Reason == v1.DisruptionReasonEmpty {
			return Decision{Commands: d.Commands[:1], Skipped: d.Skipped}
		}
	}
	staticCmd, staticSkipped, ok := StaticDrift(snap, ofStatic, opts)
	if ok {
		return Decision{Commands: []Command{staticCmd}, Skipped: staticSkipped}
	}
	cmd, driftSkipped, ok := Drift(snap, cands, opts)
	for node, why := range staticSkipped {
		driftSkipped[node] = why
	}
	if ok {
		return Decision{Commands: []Command{cmd}, Skipped: driftSkipped}
	}
	var consolidating []Candidate
	for _, c := range cands {
		if c.Blocked == "" {
			if never[c.NodePool] {
				c.Blocked = "consolidateAfter is Never"
			} else if !c.Consolidatable {
				// Not yet quiet for consolidateAfter: not worth an event.
				continue
			}
		}
		consolidating = append(consolidating, c)
	}
	d := Consolidate(snap, consolidating, opts)
	for node, why := range driftSkipped {
		d.Skipped[node] = why
	}
	return d
}

// Drift picks the drifted nodes to replace now, in one command: empty ones
// first, then the longest drifted; each that is not blocked, that its
// pool's drift budget (allowed) still lets go, and whose pods fit on the
// other nodes and the replacements the command launches. Budgets are the
// only limit on how many go at once. Karpenter gets there with one node
// per command and many commands in flight; Joiner puts them in one
// command, whose replacements are planned together (fewer, fuller nodes
// than one per candidate), and runs it beside other commands: the next
// pass, a moment later, drifts what the budgets allow beyond it. It says
// why each drifted node it passes over stays.
func Drift(snap scheduling.Snapshot, cands []Candidate, opts Options) (Command, map[string]string, bool) {
	allowed, sched := opts.AllowedDrift, opts.Scheduling
	skipped := map[string]string{}
	var drifted []Candidate
	for _, c := range cands {
		if !c.DriftedSince.IsZero() {
			drifted = append(drifted, c)
		}
	}
	if len(drifted) == 0 {
		return Command{}, skipped, false
	}
	busy := busyNodes(snap)
	sort.SliceStable(drifted, func(i, j int) bool {
		a, b := drifted[i], drifted[j]
		if busy[a.Node] != busy[b.Node] {
			return !busy[a.Node]
		}
		if !a.DriftedSince.Equal(b.DriftedSince) {
			return a.DriftedSince.Before(b.DriftedSince)
		}
		return a.Node < b.Node
	})
	// Each node is tried against the room the ones chosen before it left
	// (Remove keeps their pods placed), so choosing n nodes plans each
	// node's pods once rather than the whole batch's n times.
	cluster := scheduling.NewCluster(snap, sched)
	var batch []Candidate
	taken := map[string]int{}
	for _, c := range drifted {
		// Empty nodes go first, as in Karpenter, and in a command of their
		// own: they need no replacement, so nothing makes them wait for one.
		if len(batch) > 0 && !busy[batch[0].Node] && busy[c.Node] {
			break
		}
		if c.Blocked != "" && !c.Forceable {
			skipped[c.Node] = "drifted, but " + c.Blocked
			continue
		}
		if allowed[c.NodePool]-taken[c.NodePool] <= 0 {
			skipped[c.Node] = "drifted, but " + opts.budgetReason(c.NodePool, v1.DisruptionReasonDrifted)
			continue
		}
		r, err := cluster.TryRemove(c.Node)
		if err != nil || len(r.Unschedulable) > 0 {
			if len(batch) == 0 {
				skipped[c.Node] = "drifted, but its pods would not fit anywhere else"
			}
			// Otherwise it may fit once the nodes chosen before it are
			// replaced: a later pass tries it again.
			continue
		}
		if waitsForInFlight(cluster, c.Node, r) {
			skipped[c.Node] = "drifted, but " + WaitingForLaunchReason
			continue
		}
		if _, err := cluster.Remove(c.Node); err != nil {
			continue
		}
		batch = append(batch, c)
		taken[c.NodePool]++
	}
	cmd, ok := jointReplacement(snap, batch, sched, skipped)
	return cmd, skipped, ok
}

// busyNodes are the nodes running pods other than their own (DaemonSet,
// mirror): the nodes that are not empty.
func busyNodes(snap scheduling.Snapshot) map[string]bool {
	busy := map[string]bool{}
	for _, n := range snap.Nodes {
		for _, p := range n.Pods {
			if !pods.IsOwnedByNode(p) {
				busy[n.Name] = true
				break
			}
		}
	}
	return busy
}

// waitsForInFlight reports a node whose pods would go, in part, to
// capacity still launching or not yet initialized, rather than to the
// replacements removal r launches: as in Karpenter, a decision that relies
// on a node that has not come up waits for it. Among such nodes is the
// replacement an abandoned drift left, up but never initialized; launching
// another for the same pods each time would pile them up.
func waitsForInFlight(cluster *scheduling.Cluster, node string, r scheduling.Removal) bool {
	if !cluster.HasInFlight() {
		return false
	}
	open, err := cluster.TryRemoveCountingInFlight(node)
	return err == nil && len(open.Unschedulable) == 0 && len(open.Replacements) < len(r.Replacements)
}

// jointReplacement is the command that replaces batch together: the
// replacements are planned for all of its pods at once, so they are sized
// as one plan, not as the sum of the nodes' separate ones. Should the joint
// plan leave a pod out where the node-by-node one did not (packing order
// differs), the batch is halved until it fits; its first node fitted alone.
func jointReplacement(snap scheduling.Snapshot, batch []Candidate, sched scheduling.Options, skipped map[string]string) (Command, bool) {
	for len(batch) > 0 {
		names := make([]string, len(batch))
		for i, c := range batch {
			names[i] = c.Node
		}
		r, err := scheduling.NewCluster(snap, sched).TryRemove(names...)
		if err == nil && len(r.Unschedulable) == 0 {
			return Command{Reason: v1.DisruptionReasonDrifted, Candidates: batch, Replacements: r.Replacements}, true
		}
		if len(batch) == 1 {
			skipped[batch[0].Node] = "drifted, but its pods would not fit anywhere else"
			break
		}
		batch = batch[:len(batch)/2]
	}
	return Command{}, false
}
