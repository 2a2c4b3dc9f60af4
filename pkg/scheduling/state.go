package scheduling

import (
	"fmt"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// solver is the state of one plan: the pools and their instance types, the
// existing and planned nodes, the pod groups still to place, topology counts,
// and the journal that lets a trial be undone. It lives in this file with
// the two operations that change a node, commit and newNode; everything
// else reads it. Each way of placing pods is a file of its own that drives
// these: pin.go (pods back where an earlier plan put them), greedy.go (one
// pod at a time, with lookahead typing), lpround.go
// (rounding the configuration LP, seeded by lpseed.go), grow.go,
// squeeze.go and merge.go (the passes that improve a placement), size.go
// (choosing each NodeClaim's instance types); build.go makes the state
// from a Snapshot and fit.go says whether a pod may go on a node.
type solver struct {
	opts      Options
	topo      *topology
	pools     []*pool
	existing  []*node
	virtual   []*node
	groups    []*podGroup
	groupOf   map[*corev1.Pod]*podGroup
	knownKeys map[string]struct{}
	daemons   []*daemon
	// namespaces are every namespace's labels, for namespaceSelectors.
	namespaces map[string]labels.Set
	plan       *Plan
	// shapes aggregate groups for the lookahead.
	shapes []*shape
	// journal, when set, records changes for rollback.
	journal  *journal
	nextType int
	volumes  volumeState
	// shared, when the plan was given one, is what it was started from.
	shared *Shared
	// mixZones lets the rounding put pods without a zone spread on the
	// nodes of zone-spread shares; zonesApart records that a limited pool
	// rounded the two apart, so a plan with mixZones might do better.
	mixZones, zonesApart bool
	// untolerated holds the rejection made for each taint (untoleratedBy).
	untolerated map[*corev1.Taint]*rejection
	// rooms is what the plan's nodes take of the commitments' rooms, when
	// it plans them as pools (roompools.go); nil otherwise.
	rooms *resources.Resources
}

type pool struct {
	idx    int
	name   string
	np     *v1.NodePool
	weight int32
	reqs   requirements.Requirements
	taints []corev1.Taint
	types  []*itype
	// daemons are the DaemonSets that tolerate the pool's taints; which of
	// them run on a node depends on its instance type's labels too.
	daemons []*daemon
	limits  corev1.ResourceList
	// spendCap says limits hold the NodePool's spend cap
	// (spendcap.Resource), and its types' cap what a node counts.
	spendCap bool
	// acct is what the pool's nodes use and count against its limits,
	// shared with the pool's commitment pools (roompools.go).
	acct *account
	// rooms, with commitment pools, is what the plan's nodes take of each
	// commitment's room (roomResource), shared by every pool; nil
	// without.
	rooms *resources.Resources
	// room is the commitment of a commitment pool; "" for a NodePool.
	// fewest is the least of it one of the pool's types takes.
	room   string
	fewest int64
	err    error
	// minValues are the requirement keys with minValues, sorted.
	minValues []string
}

type itype struct {
	id    int
	it    *cloudprovider.InstanceType
	reqs  requirements.Requirements
	alloc resources.Resources
	cap   resources.Resources
	price float64
	// overhead is what the DaemonSets take on a node of this type in this
	// pool, and free the allocatable left for pods.
	overhead resources.Resources
	free     resources.Resources
}

type node struct {
	name     string
	existing bool
	deleting bool
	pool     *pool
	// requirements of a new node are the NodePool's requirements narrowed
	// by its pods; an existing node has labels instead.
	requirements requirements.Requirements
	taints       []corev1.Taint
	capacity     resources.Resources
	used         resources.Resources
	target       *itype
	pods         []*corev1.Pod
	hostPorts    []pods.HostPort
	groups       map[*podGroup]int
	// attach tracks attached volumes where a limit applies; nil for none.
	attach *nodeAttachments
	// podSets are an existing node's pods as it came, by namespace and
	// labels, for counting them against topology constraints.
	podSets []podSet
	// labels are an existing node's labels, which its requirements are.
	labels map[string]string
}

// podSet counts the pods of one namespace and one set of labels on a node:
// a node runs a few Deployments' pods, and counting each matched set once
// rather than each pod is most of what topology counting saves.
type podSet struct {
	namespace string
	labels    labels.Set
	count     int
}

// domain is the node's one value for key, if it has exactly one: values
// without building a slice, asked of every existing node for every
// topology constraint.
func (n *node) domain(key string) (string, bool) {
	if n.existing {
		v, ok := n.labels[key]
		return v, ok
	}
	return single(n.values(key))
}

// labelValues is an existing node's value for key, as a list.
func (n *node) labelValues(key string) []string {
	if v, ok := n.labels[key]; ok {
		return []string{v}
	}
	return nil
}

// values returns the values node label key can take.
func (n *node) values(key string) []string {
	if n.existing {
		return n.labelValues(key)
	}
	r, ok := n.requirements[key]
	if n.target != nil {
		if t, tok := n.target.reqs[key]; tok {
			if ok {
				return r.Intersect(t).Values()
			}
			return t.Values()
		}
	}
	if !ok {
		return nil
	}
	return r.Values()
}

// commit places the pod on the node and records it everywhere.
func (s *solver) commit(pg *podGroup, pc *podConstraints, n *node, pod *corev1.Pod) {
	domains, _ := s.decideDomains(pg, pc, n)
	s.touchNode(n)
	s.touchGroup(pg)
	n.used = n.used.Add(pg.requests)
	n.pods = append(n.pods, pod)
	n.hostPorts = append(n.hostPorts, pg.hostPorts...)
	s.attachTo(n, pg.attachments)
	if n.groups == nil {
		// An existing node starts without one: most of a repack's
		// 2,000 take no pod.
		n.groups = map[*podGroup]int{}
	}
	n.groups[pg]++
	pg.remaining--
	if pg.shape != nil {
		pg.shape.remaining--
	}
	if !n.existing {
		for k, p := range pc.nodeReqs {
			if r, ok := n.requirements[k]; ok {
				n.requirements[k] = r.Intersect(p)
			} else if _, tok := n.target.reqs[k]; !tok && !p.AbsentOK() {
				n.requirements[k] = p
			}
		}
		for k, d := range domains {
			if k == corev1.LabelHostname {
				continue
			}
			n.requirements[k] = requirements.In(k, d)
		}
	}
	domainOf := func(key string) (string, bool) {
		if d, ok := domains[key]; ok {
			return d, true
		}
		vals := n.values(key)
		if len(vals) == 1 {
			return vals[0], true
		}
		return "", false
	}
	for _, g := range pg.matchedBy {
		if d, ok := domainOf(g.key); ok && g.filter.passes(n) {
			s.bump(g.counts, d, 1)
		}
	}
	for _, g := range pg.ownedAnti {
		if d, ok := domainOf(g.key); ok {
			s.bump(g.owners, d, 1)
		}
	}
	if n.existing {
		s.plan.Existing[pod.Namespace+"/"+pod.Name] = n.name
	}
}

func (s *solver) newNode(p *pool, t *itype) *node {
	reqs := p.reqs.Copy()
	for _, k := range []string{corev1.LabelTopologyZone, v1.LabelCapacityType} {
		if r, ok := reqs[k]; ok {
			reqs[k] = r.Intersect(t.reqs[k])
		}
	}
	return &node{name: "candidate", pool: p, requirements: reqs, taints: p.taints, capacity: t.free, target: t, groups: map[*podGroup]int{}}
}

func (p *pool) withinLimits(capacity resources.Resources) bool {
	if len(p.limits) == 0 {
		return true
	}
	for name, limit := range p.limits {
		if name == "nodes" {
			continue
		}
		// A resource the pool and the node do not have is never over.
		if after := p.usageOf(name) + capacity.Of(name); after != 0 && after > resources.Units(name, limit) {
			return false
		}
	}
	return true
}

// overCap says a node of type t would take p over its spend cap.
func (p *pool) overCap(t *itype) bool {
	if !p.spendCap {
		return false
	}
	limit := p.limits[spendcap.Resource]
	return p.acct.usage.Of(spendcap.Resource)+t.cap.Of(spendcap.Resource) > limit.Value()
}

// capError names the spend cap that stops the pool, what its nodes
// already cost, what the cheapest node that fits would add, and the fix.
func (p *pool) capError(t *itype) error {
	limit := p.limits[spendcap.Resource]
	return fmt.Errorf("a node would exceed the spend cap: %s is $%.4f/h, the pool's nodes cost $%.4f/h and the cheapest instance type that fits (%s) adds up to $%.4f/h; raise the annotation to launch more",
		spendcap.Annotation, spendcap.Dollars(limit.Value()), spendcap.Dollars(p.acct.usage.Of(spendcap.Resource)), t.it.Name, spendcap.Dollars(t.cap.Of(spendcap.Resource)))
}

// limitShare is the largest share of one of p's limits that a node of
// type t takes.
func (p *pool) limitShare(t *itype) float64 {
	share := 0.0
	for name, limit := range p.limits {
		if name == "nodes" {
			if limit.Value() > 0 {
				share = max(share, 1/float64(limit.Value()))
			}
			continue
		}
		if q, lim := t.cap.Of(name), resources.Units(name, limit); q != 0 && lim > 0 {
			share = max(share, float64(q)/float64(lim))
		}
	}
	return share
}

// journal records what a trial changes so that it can be undone: trying
// the removal of each of 2,000 nodes against one shared model is far
// cheaper than rebuilding the model 2,000 times.
type journal struct {
	nodes  map[*node]nodeSave
	groups map[*podGroup]groupSave
	shapes map[*shape]int
	pools  map[*account]poolSave
	// rooms is the commitments' use before the trial, when it had any.
	rooms   *resources.Resources
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
	s.journal = &journal{nodes: map[*node]nodeSave{}, groups: map[*podGroup]groupSave{}, shapes: map[*shape]int{}, pools: map[*account]poolSave{}, virtual: len(s.virtual)}
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
	if _, ok := j.pools[p.acct]; !ok {
		j.pools[p.acct] = poolSave{usage: p.acct.usage, nodes: p.acct.nodes}
	}
	if p.rooms != nil && j.rooms == nil {
		saved := *p.rooms
		j.rooms = &saved
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
	for a, v := range j.pools {
		a.usage, a.nodes = v.usage, v.nodes
	}
	if j.rooms != nil {
		*s.rooms = *j.rooms
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

// account is a pool's usage and node count.
type account struct {
	usage resources.Resources
	nodes int64
}

// charge counts a node's capacity (add) in place of another's (sub) and
// changes the node count by nodes, in the pool's account and in the
// commitments' rooms.
func (p *pool) charge(add, sub resources.Resources, nodes int64) {
	p.acct.usage = p.acct.usage.Sub(sub).Add(add)
	p.acct.nodes += nodes
	if p.rooms != nil {
		*p.rooms = p.rooms.Sub(sub).Add(add)
	}
}

// usageOf is what the pool's nodes use of name: of a commitment's room,
// what every pool's nodes take of it.
func (p *pool) usageOf(name corev1.ResourceName) int64 {
	if p.rooms != nil && isRoomResource(name) {
		return p.rooms.Of(name)
	}
	return p.acct.usage.Of(name)
}
