package scheduling

import (
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
)

// journal records what a trial changes so that it can be undone: trying
// the removal of each of 2,000 nodes against one shared model is far
// cheaper than rebuilding the model 2,000 times.
type journal struct {
	nodes   map[*node]nodeSave
	groups  map[*podGroup]groupSave
	shapes  map[*shape]int
	pools   map[*pool]poolSave
	counts  []countUndo
	virtual int
}

type nodeSave struct {
	used      resources.Resources
	pods      []*corev1.Pod
	hostPorts []pods.HostPort
	groups    map[*podGroup]int
	deleting  bool
	// target and capacity change when a planned node grows.
	target   *itype
	capacity resources.Resources
}

type groupSave struct {
	remaining int
	pods      []*corev1.Pod
}

type poolSave struct {
	usage resources.Resources
	nodes int64
}

type countUndo struct {
	m     map[string]int
	key   string
	delta int
}

func (s *solver) begin() {
	s.journal = &journal{nodes: map[*node]nodeSave{}, groups: map[*podGroup]groupSave{}, shapes: map[*shape]int{}, pools: map[*pool]poolSave{}, virtual: len(s.virtual)}
}

// touchNode saves a node before its first change in the trial.
func (s *solver) touchNode(n *node) {
	j := s.journal
	if j == nil {
		return
	}
	if _, ok := j.nodes[n]; ok {
		return
	}
	groups := make(map[*podGroup]int, len(n.groups))
	for g, c := range n.groups {
		groups[g] = c
	}
	j.nodes[n] = nodeSave{used: n.used, pods: n.pods, hostPorts: n.hostPorts, groups: groups, deleting: n.deleting, target: n.target, capacity: n.capacity}
}

func (s *solver) touchGroup(g *podGroup) {
	j := s.journal
	if j == nil {
		return
	}
	if _, ok := j.groups[g]; ok {
		return
	}
	j.groups[g] = groupSave{remaining: g.remaining, pods: g.pods}
	if sh := g.shape; sh != nil {
		if _, ok := j.shapes[sh]; !ok {
			j.shapes[sh] = sh.remaining
		}
	}
}

func (s *solver) touchPool(p *pool) {
	j := s.journal
	if j == nil {
		return
	}
	if _, ok := j.pools[p]; !ok {
		j.pools[p] = poolSave{usage: p.usage, nodes: p.nodes}
	}
}

// bump changes a topology counter, journaled.
func (s *solver) bump(m map[string]int, key string, delta int) {
	m[key] += delta
	if s.journal != nil {
		s.journal.counts = append(s.journal.counts, countUndo{m, key, delta})
	}
}

// rollback undoes everything since begin.
func (s *solver) rollback() {
	j := s.journal
	if j == nil {
		return
	}
	for n, v := range j.nodes {
		n.used, n.pods, n.hostPorts, n.groups, n.deleting = v.used, v.pods, v.hostPorts, v.groups, v.deleting
		n.target, n.capacity = v.target, v.capacity
	}
	for g, v := range j.groups {
		g.remaining, g.pods = v.remaining, v.pods
	}
	for sh, v := range j.shapes {
		sh.remaining = v
	}
	for p, v := range j.pools {
		p.usage, p.nodes = v.usage, v.nodes
	}
	for i := len(j.counts) - 1; i >= 0; i-- {
		c := j.counts[i]
		c.m[c.key] -= c.delta
	}
	s.virtual = s.virtual[:j.virtual]
	s.journal = nil
}

// keep ends the trial and keeps its changes.
func (s *solver) keep() { s.journal = nil }
