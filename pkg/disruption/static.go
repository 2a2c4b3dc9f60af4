package disruption

import (
	"fmt"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// StaticDrift replaces the drifted nodes of a static NodePool (spec.replicas,
// StaticCapacity) one for one: each with a fresh node of the pool's
// template, launched and initialized before the drifted one drains, so the
// pool keeps its count. It takes as many of a pool's drifted nodes at once
// as its drift budget allows, and no more than its limits.nodes leaves
// room for, since every replacement is a node more until its candidate is
// gone (with limits.nodes equal to spec.replicas a drifted static node is
// never replaced, as in Karpenter). A pool with more nodes than replicas
// is left to scale down first. It returns the command of the first pool
// with work, and why each drifted static node it passes over stays.
func StaticDrift(snap scheduling.Snapshot, cands []Candidate, opts Options) (Command, map[string]string, bool) {
	allowed, sched := opts.AllowedDrift, opts.Scheduling
	skipped := map[string]string{}
	total, active := map[string]int64{}, map[string]int64{}
	for _, n := range snap.Nodes {
		total[n.NodePool]++
		if !n.MarkedForDeletion {
			active[n.NodePool]++
		}
	}
	byPool := map[string][]Candidate{}
	for _, c := range cands {
		if !c.DriftedSince.IsZero() {
			byPool[c.NodePool] = append(byPool[c.NodePool], c)
		}
	}
	pools := append([]scheduling.NodePool(nil), snap.Static...)
	sort.Slice(pools, func(i, j int) bool { return pools[i].NodePool.Name < pools[j].NodePool.Name })
	for _, p := range pools {
		np := p.NodePool
		drifted := byPool[np.Name]
		if len(drifted) == 0 {
			continue
		}
		sort.SliceStable(drifted, func(i, j int) bool {
			if !drifted[i].DriftedSince.Equal(drifted[j].DriftedSince) {
				return drifted[i].DriftedSince.Before(drifted[j].DriftedSince)
			}
			return drifted[i].Node < drifted[j].Node
		})
		var eligible []Candidate
		for _, c := range drifted {
			if c.Blocked != "" && !c.Forceable {
				skipped[c.Node] = "drifted, but " + c.Blocked
				continue
			}
			eligible = append(eligible, c)
		}
		room := int64(len(eligible))
		why := ""
		if np.Spec.Replicas != nil && active[np.Name] > *np.Spec.Replicas {
			room, why = 0, fmt.Sprintf("drifted, but static nodepool %q has more nodes than its %d replicas and scales down first", np.Name, *np.Spec.Replicas)
		}
		if b := int64(allowed[np.Name]); b < room {
			room, why = max(b, 0), "drifted, but "+opts.budgetReason(np.Name, v1.DisruptionReasonDrifted)
		}
		if q, ok := np.Spec.Limits[v1.ResourceNodes]; ok {
			if headroom := q.Value() - total[np.Name]; headroom < room {
				room, why = max(headroom, 0), fmt.Sprintf("drifted, but static nodepool %q's limits.nodes (%d) leaves no room for a replacement", np.Name, q.Value())
			}
		}
		for _, c := range eligible[room:] {
			skipped[c.Node] = why
		}
		if room == 0 {
			continue
		}
		repl, err := scheduling.StaticNodeClaim(p, snap.DaemonSets, sched)
		if err != nil {
			for _, c := range eligible {
				skipped[c.Node] = "drifted, but no replacement can be planned: " + err.Error()
			}
			continue
		}
		cmd := Command{Reason: v1.DisruptionReasonDrifted, Static: true, Candidates: eligible[:room]}
		for range room {
			cp := *repl
			cmd.Replacements = append(cmd.Replacements, &cp)
		}
		return cmd, skipped, true
	}
	return Command{}, skipped, false
}
