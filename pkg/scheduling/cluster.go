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
	// inFlight is the capacity still launching (NodeClaims without a node,
	// nodes not yet initialized) that the model closed to displaced pods.
	inFlight []*node
	// claims are the pending pods by the node the model placed them on.
	claims map[string][]*corev1.Pod
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

// NewCluster builds the model. snap.Nodes carry their pods.
//
// snap.Pods, if any, are pending pods that keep their claim on capacity:
// each is placed where kube-scheduler can bind it now (an initialized node
// with room), else on capacity being launched, which is most likely what
// was launched for it. A pending pod that fits nowhere claims nothing: the
// provisioner plans new capacity for it. Without these claims, the room a
// pending pod is about to take, or a node launched for it that it has not
// reached yet, looks free, and a removal would plan onto it.
//
// Capacity still launching (InFlight) then takes no displaced pods: a
// removal must not evict pods onto a machine that is not Ready and may
// never be, or into room launched for other pods.
func NewCluster(snap Snapshot, opts Options) *Cluster {
	s := newSolver(snap, opts)
	var all []*corev1.Pod
	for _, n := range snap.Nodes {
		all = append(all, n.Pods...)
	}
	all = append(all, snap.Pods...)
	s.buildGroups(Snapshot{Pods: all, NodePools: snap.NodePools, DaemonSets: snap.DaemonSets})
	for _, g := range s.groups {
		g.remaining, g.pods = 0, nil
		if g.shape != nil {
			g.shape.remaining = 0
		}
	}
	c := &Cluster{s: s, byName: map[string]*node{}, claims: map[string][]*corev1.Pod{}}
	for _, n := range s.existing {
		c.byName[n.name] = n
	}
	inFlight := map[*node]bool{}
	for _, in := range snap.Nodes {
		if n := c.byName[in.Name]; in.InFlight && n != nil {
			inFlight[n] = true
		}
	}
	c.claim(snap.Pods, inFlight)
	for _, n := range s.existing {
		if inFlight[n] && !n.deleting {
			n.deleting = true
			c.inFlight = append(c.inFlight, n)
		}
	}
	return c
}

// claim places the pending pods on existing capacity, initialized nodes
// first, as kube-scheduler would, and in-flight capacity after; the pods
// that fit neither stay out of the model.
func (c *Cluster) claim(pending []*corev1.Pod, inFlight map[*node]bool) {
	s := c.s
	var ready, launching []*node
	for _, n := range s.existing {
		if inFlight[n] {
			launching = append(launching, n)
		} else {
			ready = append(ready, n)
		}
	}
	byGroup := map[*podGroup][]*corev1.Pod{}
	var order []*podGroup
	for _, pod := range pending {
		g := s.groupOf[pod]
		if g == nil || g.err != nil {
			continue
		}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], pod)
	}
	sort.SliceStable(order, func(i, j int) bool { return groupBefore(order[i], order[j]) })
	for _, g := range order {
		g.pods, g.remaining = byGroup[g], len(byGroup[g])
		for _, pod := range byGroup[g] {
			if n, pc := c.firstFit(g, ready, launching); n != nil {
				s.commit(g, pc, n, pod)
				c.claims[n.name] = append(c.claims[n.name], pod)
			} else {
				g.remaining--
			}
		}
		g.pods, g.remaining = nil, 0
		if g.shape != nil {
			g.shape.remaining = 0
		}
	}
}

// firstFit is the first node, of the lists in order, that takes a pod of
// the group under any of its variants.
func (c *Cluster) firstFit(g *podGroup, lists ...[]*node) (*node, *podConstraints) {
	for _, nodes := range lists {
		for _, pc := range g.variants {
			cursor := 0
			if n := c.s.scan(g, pc, nodes, &cursor); n != nil {
				return n, pc
			}
		}
	}
	return nil, nil
}

// Claims are the pending pods the model holds room for, by node name.
func (c *Cluster) Claims() map[string][]*corev1.Pod { return c.claims }

// TryRemove reports what removing the named nodes would take, and leaves
// the model as it was.
func (c *Cluster) TryRemove(names ...string) (Removal, error) {
	r, err := c.remove(names, false)
	c.s.rollback()
	return r, err
}

// TryRemoveCountingInFlight is TryRemove with the capacity still launching
// open to the displaced pods. A removal that TryRemove refuses but this
// allows is waiting for that capacity: the reason to give.
func (c *Cluster) TryRemoveCountingInFlight(names ...string) (Removal, error) {
	r, err := c.remove(names, true)
	c.s.rollback()
	return r, err
}

// HasInFlight reports capacity still launching in the model.
func (c *Cluster) HasInFlight() bool { return len(c.inFlight) > 0 }

// Remove removes the named nodes for good, placing their pods, so that
// later trials see them gone: how several removals are combined.
func (c *Cluster) Remove(names ...string) (Removal, error) {
	r, err := c.remove(names, false)
	if err != nil {
		c.s.rollback()
		return r, err
	}
	c.s.keep()
	return r, nil
}

func (c *Cluster) remove(names []string, openInFlight bool) (Removal, error) {
	s := c.s
	s.begin()
	if openInFlight {
		for _, n := range c.inFlight {
			s.touchNode(n)
			n.deleting = false
		}
	}
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
	// Replacements are priced within the commitments' room, and pinned
	// to the room they get, as a plan's NodeClaims are (room.go).
	withinLimits(r.Replacements)
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
