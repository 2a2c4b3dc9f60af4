package scheduling

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
)

// shape is what the lookahead needs of a set of groups: their requests,
// per-node cap and compatibility. Replicas that differ only in labels (seven
// spread groups of one size, say) share a shape, which keeps the lookahead's
// cost proportional to distinct sizes rather than distinct workloads.
type shape struct {
	requests     resources.Resources
	perNodeLimit int64
	value        float64
	// valued: value is computed. It depends only on what the shape's key
	// holds, so each shape's groups share it.
	valued    bool
	remaining int
	// rep is a group of the shape, whose constraints stand for all.
	rep *podGroup
	// typeOK and poolOK cache compatibility: 0 unknown, 1 yes, 2 no.
	typeOK []int8
	poolOK []int8
}

func (s *solver) buildShapes() {
	byKey := map[string]*shape{}
	for _, pg := range s.groups {
		if pg.err != nil {
			continue
		}
		tol, _ := json.Marshal(pg.tolerations)
		key := fmt.Sprintf("%s|%d|%s|%s", pg.requests, pg.perNodeLimit, pg.variants[0].nodeReqs.String(), tol)
		sh, ok := byKey[key]
		if !ok {
			sh = &shape{rep: pg, requests: pg.requests, perNodeLimit: pg.perNodeLimit, typeOK: make([]int8, s.nextType+1), poolOK: make([]int8, len(s.pools))}
			byKey[key] = sh
			s.shapes = append(s.shapes, sh)
		}
		sh.remaining += pg.remaining
		pg.shape = sh
	}
	for _, sh := range s.shapes {
		for _, p := range s.pools {
			if p.err == nil {
				s.groupPoolCompatible(sh.rep, p)
			} else {
				sh.poolOK[p.idx] = 2
			}
		}
	}
	sort.SliceStable(s.shapes, func(i, j int) bool {
		a, b := s.shapes[i].requests, s.shapes[j].requests
		if a.CPU != b.CPU {
			return a.CPU > b.CPU
		}
		return a.Memory > b.Memory
	})
}

// forcedNodes is how many more nodes the pending pods need at least, because
// hostname anti-affinity or spread keeps them apart. The lookahead spreads
// the other pods over that many nodes instead of piling them on the first.
func (s *solver) forcedNodes() int {
	forced := 1
	for _, g := range s.topo.ordered {
		if g.key != hostnameKey || len(g.ownerGroups) == 0 {
			continue
		}
		remaining := 0
		for _, pg := range g.ownerGroups {
			remaining += pg.remaining
		}
		per := 1
		if g.kind == topoSpread && g.maxSkew > 1 {
			per = int(g.maxSkew)
		}
		if n := (remaining + per - 1) / per; n > forced {
			forced = n
		}
	}
	return forced
}
