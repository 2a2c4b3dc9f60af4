package scheduling

import (
	"fmt"
	"math"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Options tune the solver; the zero value gives the defaults.
type Options struct {
	// PriceBand keeps a NodeClaim's instance-type options within this factor
	// of the cheapest option, so a fallback launch never costs much more.
	// Default 1.3.
	PriceBand float64
	// MaxInstanceTypes caps a NodeClaim's options. Default 60, CreateFleet's limit.
	MaxInstanceTypes int
	// PreferencePolicy is Karpenter's PREFERENCE_POLICY. Default Respect.
	PreferencePolicy PreferencePolicy
	// MinValuesPolicy is Karpenter's MIN_VALUES_POLICY. Default Strict.
	MinValuesPolicy MinValuesPolicy
}

// PreferencePolicy says whether preferred scheduling terms shape a plan.
type PreferencePolicy string

const (
	// PreferencePolicyRespect treats preferences as required first and
	// drops them one at a time while a pod does not fit.
	PreferencePolicyRespect PreferencePolicy = "Respect"
	// PreferencePolicyIgnore drops preferred node affinity, preferred pod
	// affinity and anti-affinity and ScheduleAnyway spreads before planning,
	// so they cost nothing. PreferNoSchedule taints are still avoided until
	// a pod fits nowhere else, as Karpenter does under either policy.
	PreferencePolicyIgnore PreferencePolicy = "Ignore"
)

// MinValuesPolicy says what happens when a NodeClaim's instance-type
// options cannot meet a requirement's minValues.
type MinValuesPolicy string

const (
	// MinValuesPolicyStrict leaves such a NodeClaim out: its pods try the
	// next NodePool, or stay pending with the requirement named.
	MinValuesPolicyStrict MinValuesPolicy = "Strict"
	// MinValuesPolicyBestEffort launches with as many values as the options
	// have, lowers minValues on the NodeClaim to match and marks it relaxed.
	MinValuesPolicyBestEffort MinValuesPolicy = "BestEffort"
)

func (o Options) withDefaults() Options {
	if o.PriceBand <= 1 {
		o.PriceBand = 1.3
	}
	if o.MaxInstanceTypes <= 0 {
		o.MaxInstanceTypes = 60
	}
	if o.PreferencePolicy == "" {
		o.PreferencePolicy = PreferencePolicyRespect
	}
	if o.MinValuesPolicy == "" {
		o.MinValuesPolicy = MinValuesPolicyStrict
	}
	return o
}

// Solve plans the snapshot.
func Solve(snap Snapshot, opts Options) *Plan {
	s := place(snap, opts)
	s.finish()
	return s.plan
}

// place builds the solver for snap and places every pod, leaving the new
// nodes un-sized.
func place(snap Snapshot, opts Options) *solver {
	s := &solver{opts: opts.withDefaults(), topo: newTopology(), plan: &Plan{Existing: map[string]string{}}}
	s.knownKeys = knownLabelKeys(snap.NodePools)
	s.volumes = newVolumeState(snap)
	s.buildNamespaces(snap)
	s.buildPools(snap)
	s.buildExisting(snap.Nodes, s.daemons)
	s.buildGroups(snap)
	// Pods that need nodes of their own go first and lay out those nodes,
	// pulling in a fair share of the rest; LP rounding then packs the bulk
	// of what is left, and the greedy pass places the remainder.
	s.run(func(g *podGroup) bool { return g.perNodeLimit > 0 }, false)
	s.lpRound()
	s.run(func(*podGroup) bool { return true }, true)
	return s
}

// SolveOne plans snap.Pods onto a single new node, the cheapest instance
// type that holds them all, or returns nil when none does or the pods have
// topology constraints that one node could break. Consolidation uses it to
// replace several nodes with one: unlike a plan of two or more nodes, one
// node that holds every displaced pod has room for them in whatever order
// and wherever kube-scheduler puts them.
func SolveOne(snap Snapshot, opts Options) *NewNodeClaim {
	s := place(snap, opts)
	switch {
	case len(s.plan.Unschedulable) > 0 || len(s.plan.Existing) > 0 || len(s.virtual) == 0:
		return nil
	case len(s.virtual) == 1:
		return s.rightSize(s.virtual[0], false)
	}
	return s.joinAll(s.virtual)
}

// joinAll sizes one node for the pods of all of nodes, or returns nil when
// they cannot share one (different pools, topology constraints, no type
// large enough). It changes nothing.
func (s *solver) joinAll(nodes []*node) *NewNodeClaim {
	if len(nodes) < 2 {
		return nil
	}
	joined := nodes[0]
	if !mergeable(joined) {
		return nil
	}
	for _, n := range nodes[1:] {
		if n.pool != joined.pool || !mergeable(n) {
			return nil
		}
		j, ok := s.join(joined, n)
		if !ok {
			return nil
		}
		joined = j
	}
	return s.rightSize(joined, false)
}

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
	usage   resources.Resources
	nodes   int64
	err     error
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
	// requirements of an existing node are its labels; of a new node, the
	// NodePool's requirements narrowed by its pods.
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
}

// values returns the values node label key can take.
func (n *node) values(key string) []string {
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

func knownLabelKeys(pools []NodePool) map[string]struct{} {
	keys := map[string]struct{}{
		corev1.LabelTopologyZone: {}, corev1.LabelTopologyRegion: {}, corev1.LabelInstanceTypeStable: {},
		corev1.LabelArchStable: {}, corev1.LabelOSStable: {}, v1.LabelCapacityType: {}, corev1.LabelWindowsBuild: {},
	}
	for _, p := range pools {
		for _, it := range p.InstanceTypes {
			for k := range it.Labels {
				keys[k] = struct{}{}
			}
		}
	}
	return keys
}

func (s *solver) buildPools(snap Snapshot) {
	s.daemons = buildDaemons(snap.DaemonSets)
	for _, in := range snap.NodePools {
		np := in.NodePool
		p := &pool{idx: len(s.pools), name: np.Name, np: np, limits: corev1.ResourceList(np.Spec.Limits), taints: np.Spec.Template.Spec.Taints}
		if np.Spec.Weight != nil {
			p.weight = *np.Spec.Weight
		}
		reqs, err := requirements.FromNodeSelectorRequirements(np.Spec.Template.Spec.Requirements...)
		if err != nil {
			p.err = fmt.Errorf("invalid requirements: %w", err)
			s.pools = append(s.pools, p)
			continue
		}
		for k, v := range np.Spec.Template.Labels {
			reqs.Add(requirements.In(k, v))
		}
		reqs.Add(requirements.In(v1.LabelNodePool, np.Name))
		p.reqs = reqs
		p.minValues = minValuesKeys(reqs)
		p.daemons = poolDaemons(s.daemons, p)
		usage := resources.FromResourceList(in.InUse)
		if n, ok := in.InUse["nodes"]; ok {
			p.nodes = n.Value()
		}
		p.usage = usage
		zones, cts := map[string]struct{}{}, map[string]struct{}{}
		for _, it := range in.InstanceTypes {
			t := s.buildType(p, it)
			if t == nil {
				continue
			}
			p.types = append(p.types, t)
			for _, z := range t.reqs[corev1.LabelTopologyZone].Values() {
				zones[z] = struct{}{}
				s.topo.addDomain(corev1.LabelTopologyZone, z)
			}
			for _, c := range t.reqs[v1.LabelCapacityType].Values() {
				cts[c] = struct{}{}
				s.topo.addDomain(v1.LabelCapacityType, c)
			}
			for k, v := range it.Labels {
				s.topo.addDomain(k, v)
			}
		}
		// New nodes always carry a zone and a capacity type; make the pool's
		// choices explicit so topology can count them.
		if len(zones) > 0 {
			p.reqs.Add(requirements.InSet(corev1.LabelTopologyZone, zones))
			p.reqs.Add(requirements.InSet(v1.LabelCapacityType, cts))
		}
		for k, r := range p.reqs {
			for _, v := range r.Values() {
				s.topo.addDomain(k, v)
			}
		}
		sort.SliceStable(p.types, func(i, j int) bool {
			if p.types[i].price != p.types[j].price {
				return p.types[i].price < p.types[j].price
			}
			return p.types[i].it.Name < p.types[j].it.Name
		})
		if len(p.types) == 0 {
			p.err = fmt.Errorf("no instance type satisfies the NodePool's requirements %s", p.reqs.String())
		}
		s.pools = append(s.pools, p)
	}
	// Higher weight first; equal weights in descending name order, as Karpenter does.
	sort.SliceStable(s.pools, func(i, j int) bool {
		if s.pools[i].weight != s.pools[j].weight {
			return s.pools[i].weight > s.pools[j].weight
		}
		return s.pools[i].name > s.pools[j].name
	})
	for i, p := range s.pools {
		p.idx = i
	}
}

// buildType returns the instance type as the pool sees it: only offerings
// the pool's zone and capacity-type requirements allow, priced at the
// cheapest of them. It returns nil when the pool cannot use the type.
func (s *solver) buildType(p *pool, it *cloudprovider.InstanceType) *itype {
	zoneReq, ctReq := p.reqs[corev1.LabelTopologyZone], p.reqs[v1.LabelCapacityType]
	zones, cts := map[string]struct{}{}, map[string]struct{}{}
	price := math.Inf(1)
	for _, o := range it.Offerings {
		if !o.Available || (zoneReq != nil && !zoneReq.Has(o.Zone)) || (ctReq != nil && !ctReq.Has(o.CapacityType)) {
			continue
		}
		zones[o.Zone] = struct{}{}
		cts[o.CapacityType] = struct{}{}
		price = math.Min(price, o.Price)
	}
	if len(zones) == 0 {
		return nil
	}
	reqs := requirements.LabelRequirements(it.Labels)
	reqs[corev1.LabelTopologyZone] = requirements.InSet(corev1.LabelTopologyZone, zones)
	reqs[v1.LabelCapacityType] = requirements.InSet(v1.LabelCapacityType, cts)
	if err := s.typeCompatible(p.reqs, reqs); err != nil {
		return nil
	}
	s.nextType++
	t := &itype{id: s.nextType, it: it, reqs: reqs, alloc: resources.FromResourceList(it.Allocatable), cap: resources.FromResourceList(it.Capacity), price: price}
	t.overhead = typeOverhead(p.daemons, p.reqs, reqs)
	t.free = t.alloc.Sub(t.overhead)
	return t
}

// typeCompatible checks predicates against an instance type's labels. Keys
// the type does not define are fine when they are custom labels (the
// NodePool sets them) and absent when they are well-known instance labels.
func (s *solver) typeCompatible(preds, typeReqs requirements.Requirements) error {
	for k, p := range preds {
		t, ok := typeReqs[k]
		if !ok {
			if _, known := s.knownKeys[k]; known && !p.AbsentOK() {
				return fmt.Errorf("instance type has no label %q (requires %s)", k, p)
			}
			continue
		}
		if t.Intersect(p).Empty() {
			return fmt.Errorf("requires %s, instance type has %s", p, t)
		}
	}
	return nil
}

func (s *solver) buildExisting(nodes []*Node, daemons []*daemon) {
	for _, in := range nodes {
		n := &node{name: in.Name, existing: true, deleting: in.MarkedForDeletion, requirements: requirements.LabelRequirements(in.Labels),
			capacity: resources.FromResourceList(in.Allocatable), groups: map[*podGroup]int{}}
		for _, t := range in.Taints {
			if t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
				n.deleting = true
			}
			if in.InFlight && v1.IsEphemeralTaint(t) {
				continue
			}
			n.taints = append(n.taints, t)
		}
		if in.InFlight {
			n.used = pendingDaemons(daemons, in, n.taints)
		}
		for _, pod := range in.Pods {
			n.used = n.used.Add(resources.PodRequests(pod))
			n.pods = append(n.pods, pod)
			n.hostPorts = append(n.hostPorts, pods.HostPorts(pod)...)
		}
		s.attachExisting(n, in)
		for k, v := range in.Labels {
			s.topo.addDomain(k, v)
		}
		s.existing = append(s.existing, n)
	}
	sort.SliceStable(s.existing, func(i, j int) bool { return s.existing[i].name < s.existing[j].name })
}

func (s *solver) buildGroups(snap Snapshot) {
	byKey := map[string]*podGroup{}
	s.groupOf = make(map[*corev1.Pod]*podGroup, len(snap.Pods))
	for _, pod := range snap.Pods {
		k := groupKey(pod) + s.volumeKey(pod)
		pg, ok := byKey[k]
		if !ok {
			pg = s.analyze(pod)
			s.analyzeVolumes(pg, pod)
			pg.id = len(s.groups)
			byKey[k] = pg
			s.groups = append(s.groups, pg)
		}
		pg.pods = append(pg.pods, pod)
		s.groupOf[pod] = pg
	}
	// Anti-affinity of pods already running constrains new pods too.
	for _, n := range s.existing {
		for _, pod := range n.pods {
			if a := withLabelKeys(pod).Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
				for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					g, err := s.topo.group(topoAntiAffinity, term.TopologyKey, s.termNamespaces(pod.Namespace, term), term.LabelSelector, 0, 0)
					if err == nil {
						for _, d := range n.values(g.key) {
							g.owners[d]++
						}
					}
				}
			}
		}
	}
	for _, g := range s.topo.ordered {
		for _, pg := range s.groups {
			if pg.err == nil && g.matches(pg.namespace, pg.labels) {
				pg.matchedBy = append(pg.matchedBy, g)
				if g.kind == topoAntiAffinity {
					pg.inverseAnti = append(pg.inverseAnti, g)
				}
			}
		}
		for _, n := range s.existing {
			vals := n.values(g.key)
			if len(vals) != 1 || !g.filter.passes(n) {
				continue
			}
			for _, pod := range n.pods {
				if g.matches(pod.Namespace, labels.Set(pod.Labels)) {
					g.counts[vals[0]]++
				}
			}
		}
	}
	for _, pg := range s.groups {
		pg.remaining = len(pg.pods)
	}
	s.buildShapes()
	for _, pg := range s.groups {
		sort.SliceStable(pg.pods, func(i, j int) bool {
			a, b := pg.pods[i], pg.pods[j]
			if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
				return a.CreationTimestamp.Before(&b.CreationTimestamp)
			}
			return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
		})
		s.value(pg)
	}
	// Pods that need a node of their own go first, so that they lay out the
	// nodes and everything else fills around them; then largest first.
	sort.SliceStable(s.groups, func(i, j int) bool { return groupBefore(s.groups[i], s.groups[j]) })
}

// value sets the group's per-pod lower-bound price: the cheapest share of
// any instance type that could hold it.
func (s *solver) value(pg *podGroup) {
	if pg.err != nil || len(pg.variants) == 0 {
		return
	}
	best := math.Inf(1)
	for _, p := range s.pools {
		if p.err != nil || !s.groupPoolCompatible(pg, p) {
			continue
		}
		for _, t := range p.types {
			if !s.groupTypeCompatible(pg, p, t) {
				continue
			}
			free := t.free
			if !pg.requests.Fits(free) {
				continue
			}
			if v := t.price * pg.requests.Fraction(free); v < best {
				best = v
			}
		}
	}
	if !math.IsInf(best, 1) {
		pg.value = best
		pg.shape.value = best
	}
}

func (s *solver) groupPoolCompatible(pg *podGroup, p *pool) bool {
	sh := pg.shape
	if c := sh.poolOK[p.idx]; c != 0 {
		return c == 1
	}
	pc := pg.variants[0]
	ok := true
	if _, bad := pg.untolerated(p.taints, pc.toleratePreferNoSchedule); bad {
		ok = false
	} else if p.reqs.Compatible(s.podNodeReqs(pc, p)) != nil {
		ok = false
	}
	sh.poolOK[p.idx] = boolByte(ok)
	return ok
}

// podNodeReqs drops predicates on well-known labels the pool leaves open;
// those are checked against the instance type instead.
func (s *solver) podNodeReqs(pc *podConstraints, p *pool) requirements.Requirements {
	out := requirements.Requirements{}
	for k, r := range pc.nodeReqs {
		if _, ok := p.reqs[k]; !ok {
			if _, known := s.knownKeys[k]; known {
				continue
			}
		}
		out[k] = r
	}
	return out
}

// groupTypeCompatible reports whether the group's strictest constraints
// allow the instance type; cached per shape, as shapes share constraints.
func (s *solver) groupTypeCompatible(pg *podGroup, p *pool, t *itype) bool {
	sh := pg.shape
	if c := sh.typeOK[t.id]; c != 0 {
		return c == 1
	}
	ok := s.typeCompatible(pg.variants[0].nodeReqs, t.reqs) == nil && extendedOK(pg.requests, t.alloc)
	sh.typeOK[t.id] = boolByte(ok)
	return ok
}

func boolByte(b bool) int8 {
	if b {
		return 1
	}
	return 2
}

func extendedOK(req, alloc resources.Resources) bool {
	for k, v := range req.Ext {
		if v > 0 && alloc.Ext[k] <= 0 {
			return false
		}
	}
	return true
}
