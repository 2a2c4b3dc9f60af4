package scheduling

import (
	"fmt"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
)

// finish right-sizes every new node to the cheapest instance type that holds
// its pods and writes the plan.
func (s *solver) finish() {
	s.squeeze()
	s.merge()
	for _, n := range s.virtual {
		nc, err := s.size(n, true)
		if err != nil {
			// Placement checks minValues as pods join; this catches what
			// only the cap on options shows.
			for _, pod := range n.pods {
				s.plan.Unschedulable = append(s.plan.Unschedulable, PodError{Pod: pod, Reason: fmt.Sprintf("nodepool %q: %v", n.pool.name, err)})
			}
			continue
		}
		s.plan.NewNodeClaims = append(s.plan.NewNodeClaims, nc)
	}
}

// merge joins pairs of new nodes into one when a single instance type costs
// no more than the two: the tail of a greedy packing often leaves two
// half-empty nodes, and one node also carries one set of DaemonSet pods.
// Only nodes whose pods have no topology constraints or host ports move, so
// no constraint needs re-checking.
func (s *solver) merge() {
	var cands []*node
	for _, n := range s.virtual {
		if mergeable(n) {
			cands = append(cands, n)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		return cands[i].used.Fraction(cands[i].capacity) < cands[j].used.Fraction(cands[j].capacity)
	})
	if len(cands) > mergeCandidates {
		cands = cands[:mergeCandidates]
	}
	merged := map[*node]bool{}
	for i := 0; i < len(cands); i++ {
		a := cands[i]
		if merged[a] {
			continue
		}
		for j := i + 1; j < len(cands); j++ {
			b := cands[j]
			if merged[b] || a.pool != b.pool {
				continue
			}
			joined, ok := s.join(a, b)
			if !ok {
				continue
			}
			together := s.rightSize(joined, false)
			if together == nil {
				continue
			}
			separate := s.rightSize(a, false).Price() + s.rightSize(b, false).Price()
			if together.Price() <= separate+1e-9 {
				*a = *joined
				merged[b] = true
			}
		}
	}
	if len(merged) == 0 {
		return
	}
	kept := s.virtual[:0]
	for _, n := range s.virtual {
		if !merged[n] {
			kept = append(kept, n)
		} else {
			n.pool.charge(resources.Resources{}, n.target.cap, -1)
		}
	}
	s.virtual = kept
}

// mergeable nodes hold only pods without topology constraints or host
// ports, so their pods may share any node without re-checking.
func mergeable(n *node) bool {
	for g := range n.groups {
		if len(g.matchedBy) > 0 || len(g.hostPorts) > 0 || len(g.variants[0].topologyKeys(g)) > 0 {
			return false
		}
	}
	return true
}

// join returns a node holding both nodes' pods, if some instance type of
// the pool can hold them under both nodes' requirements.
func (s *solver) join(a, b *node) (*node, bool) {
	reqs := a.requirements.Copy()
	for k, r := range b.requirements {
		if cur, ok := reqs[k]; ok {
			r = cur.Intersect(r)
		}
		if r.Empty() {
			return nil, false
		}
		reqs[k] = r
	}
	used := a.used.Add(b.used)
	target := a.target
	if b.target.price > target.price {
		target = b.target
	}
	groups := make(map[*podGroup]int, len(a.groups)+len(b.groups))
	for g, c := range a.groups {
		groups[g] += c
	}
	for g, c := range b.groups {
		groups[g] += c
	}
	j := &node{name: a.name, pool: a.pool, requirements: reqs, taints: a.taints, used: used, target: target,
		capacity: target.free, groups: groups, attach: joinAttachments(a, b),
		pods: append(append([]*corev1.Pod{}, a.pods...), b.pods...)}
	return j, true
}

// mergeCandidates bounds the merge pass to the emptiest nodes; full nodes
// gain nothing from merging and the pass is quadratic.
const mergeCandidates = 24
