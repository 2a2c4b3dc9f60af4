package disruption

import (
	"fmt"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// Decide is one round of voluntary disruption, in Karpenter's order: a
// drifted node if one may go, otherwise consolidation of the candidates
// that have been quiet for consolidateAfter. Every candidate left alone
// gets one reason, so "why not?" does not flip between two answers.
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
	staticCmd, staticSkipped, ok := StaticDrift(snap, ofStatic, opts.AllowedDrift, opts.Scheduling)
	if ok {
		return Decision{Commands: []Command{staticCmd}, Skipped: staticSkipped}
	}
	cmd, driftSkipped, ok := Drift(snap, cands, opts.AllowedDrift, opts.Scheduling)
	for node, why := range staticSkipped {
		driftSkipped[node] = why
	}
	if ok {
		return Decision{Commands: []Command{cmd}, Skipped: driftSkipped}
	}
	never := map[string]bool{}
	for _, p := range snap.NodePools {
		never[p.NodePool.Name] = p.NodePool.Spec.Disruption.ConsolidateAfter.IsNever()
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

// Drift picks the drifted node to replace next, one per command as
// Karpenter does: empty ones first, then the longest drifted; the first
// that is not blocked, that its pool's drift budget (allowed) lets go, and
// whose pods fit on other nodes and the replacements the command launches.
// It says why each drifted node it passes over stays.
func Drift(snap scheduling.Snapshot, cands []Candidate, allowed map[string]int, sched scheduling.Options) (Command, map[string]string, bool) {
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
	busy := map[string]bool{}
	for _, n := range snap.Nodes {
		for _, p := range n.Pods {
			if !pods.IsOwnedByNode(p) {
				busy[n.Name] = true
				break
			}
		}
	}
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
	cluster := scheduling.NewCluster(snap, sched)
	for _, c := range drifted {
		if c.Blocked != "" && !c.Forceable {
			skipped[c.Node] = "drifted, but " + c.Blocked
			continue
		}
		if allowed[c.NodePool] <= 0 {
			skipped[c.Node] = fmt.Sprintf("drifted, but the disruption budget of nodepool %q allows no more disruptions now", c.NodePool)
			continue
		}
		r, err := cluster.TryRemove(c.Node)
		if err != nil || len(r.Unschedulable) > 0 {
			skipped[c.Node] = "drifted, but its pods would not fit anywhere else"
			continue
		}
		return Command{Reason: v1.DisruptionReasonDrifted, Candidates: []Candidate{c}, Replacements: r.Replacements}, skipped, true
	}
	return Command{}, skipped, false
}
