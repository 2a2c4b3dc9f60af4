package scheduling

import (
	"fmt"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"
)

// Cluster is the solver's model of a whole running cluster (every node with
// the pods bound to it) on which removing nodes can be tried. Consolidation
// asks, for every candidate, "where would its pods go?"; answering on one
// shared model with rollback keeps that to milliseconds per candidate.
type Cluster struct {
	s      *solver
	byName map[string]*node
}

// Removal is what removing some nodes would take.
type Removal struct {
	// Replacements are the new NodeClaims the displaced pods need; none when
	// they all fit on other nodes.
	Replacements []*NewNodeClaim
	// Moved counts the pods that would be rescheduled.
	Moved int
	// Unschedulable pods would find no place at all.
	Unschedulable []PodError
}

// NewCluster builds the model. snap.Nodes carry their pods; snap.Pods, if
// any, are pending pods that keep their claim on capacity.
func NewCluster(snap Snapshot, opts Options) *Cluster {
	s := &solver{opts: opts.withDefaults(), topo: newTopology(), plan: &Plan{Existing: map[string]string{}}}
	s.knownKeys = knownLabelKeys(snap.NodePools)
	s.volumes = newVolumeState(snap)
	s.buildNamespaces(snap)
	s.buildPools(snap)
	s.buildExisting(snap.Nodes, s.daemons)
	var bound []*corev1.Pod
	for _, n := range snap.Nodes {
		bound = append(bound, n.Pods...)
	}
	s.buildGroups(Snapshot{Pods: bound, NodePools: snap.NodePools, DaemonSets: snap.DaemonSets})
	for _, g := range s.groups {
		g.remaining, g.pods = 0, nil
		if g.shape != nil {
			g.shape.remaining = 0
		}
	}
	c := &Cluster{s: s, byName: map[string]*node{}}
	for _, n := range s.existing {
		c.byName[n.name] = n
	}
	return c
}

// TryRemove reports what removing the named nodes would take, and leaves
// the model as it was.
func (c *Cluster) TryRemove(names ...string) (Removal, error) {
	r, err := c.remove(names)
	c.s.rollback()
	return r, err
}

// Remove removes the named nodes for good, placing their pods, so that
// later trials see them gone: how several removals are combined.
func (c *Cluster) Remove(names ...string) (Removal, error) {
	r, err := c.remove(names)
	if err != nil {
		c.s.rollback()
		return r, err
	}
	c.s.keep()
	return r, nil
}

func (c *Cluster) remove(names []string) (Removal, error) {
	s := c.s
	s.begin()
	var moving []*corev1.Pod
	for _, name := range names {
		n, ok := c.byName[name]
		if !ok {
			return Removal{}, fmt.Errorf("no node %q in the model", name)
		}
		s.touchNode(n)
		n.deleting = true
		for _, pod := range n.pods {
			if pods.IsOwnedByNode(pod) {
				continue
			}
			if g := s.groupOf[pod]; g != nil {
				s.uncount(g, n)
			}
			moving = append(moving, pod)
		}
	}
	byGroup := map[*podGroup][]*corev1.Pod{}
	var order []*podGroup
	for _, pod := range moving {
		g := s.groupOf[pod]
		if g == nil {
			continue
		}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], pod)
	}
	sort.SliceStable(order, func(i, j int) bool { return groupBefore(order[i], order[j]) })
	r := Removal{Moved: len(moving)}
	for _, g := range order {
		s.touchGroup(g)
		g.pods, g.remaining = byGroup[g], len(byGroup[g])
		if g.shape != nil {
			g.shape.remaining += len(byGroup[g])
		}
	}
	r.Unschedulable = s.placeGroups(order, true)
	for _, n := range s.virtual[s.journal.virtual:] {
		nc, err := s.size(n, false)
		if err != nil {
			for _, pod := range n.pods {
				r.Unschedulable = append(r.Unschedulable, PodError{Pod: pod, Reason: fmt.Sprintf("nodepool %q: %v", n.pool.name, err)})
			}
			continue
		}
		r.Replacements = append(r.Replacements, nc)
	}
	if one := s.joinAll(s.virtual[s.journal.virtual:]); one != nil && one.Price() <= TotalPrice(r.Replacements)+1e-9 {
		r.Replacements = []*NewNodeClaim{one}
	}
	return r, nil
}

// groupBefore is the placement order: pods needing their own node, then
// the largest.
func groupBefore(a, b *podGroup) bool {
	if (a.perNodeLimit > 0) != (b.perNodeLimit > 0) {
		return a.perNodeLimit > 0
	}
	if a.requests.CPU != b.requests.CPU {
		return a.requests.CPU > b.requests.CPU
	}
	if a.requests.Memory != b.requests.Memory {
		return a.requests.Memory > b.requests.Memory
	}
	return a.id < b.id
}
