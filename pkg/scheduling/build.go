package scheduling

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// newSolver builds the state of a plan of snap up to its pods: pools,
// types, DaemonSets, existing nodes. The caller adds the pod groups with
// buildGroups, from snap or, for consolidation, from every pod.
func newSolver(snap Snapshot, opts Options) *solver {
	s := &solver{opts: opts.withDefaults(), topo: newTopology(), plan: &Plan{Existing: map[string]string{}}}
	if snap.Shared != nil {
		s.adopt(snap.Shared)
	} else {
		s.knownKeys = knownLabelKeys(snap.NodePools)
		s.buildPools(snap)
	}
	s.volumes = newVolumeState(snap)
	s.buildNamespaces(snap)
	s.buildExisting(snap.Nodes, s.daemons)
	return s
}

// Shared is what every plan over the same NodePools and DaemonSets has in
// common: the pools, the instance types each can launch with the
// DaemonSets' overhead on them, and the label domains they offer. Building
// it is most of the time of a plan of a few nodes' pods, and
// consolidation's repack makes dozens of those a decision, so it builds it
// once (Share) and sets it in each plan's Snapshot. Nothing a plan does
// changes it.
type Shared struct {
	pools     []*pool
	daemons   []*daemon
	knownKeys map[string]struct{}
	domains   map[string]map[string]struct{}
	nextType  int
	// nodes are what each of snap.Nodes brings to a plan, by the Node:
	// a plan of a few nodes' pods also counts every other node's pods for
	// topology, and working them out again for each plan was the next
	// largest part of the time.
	nodes map[*Node]nodeBase
}

// nodeBase is what an existing node brings to a plan, from its labels
// and pods alone. Nothing reads it but buildExisting, which copies what a
// plan changes.
type nodeBase struct {
	capacity  resources.Resources
	used      resources.Resources
	hostPorts []pods.HostPort
	podSets   []podSet
	// attachments are every volume attachment of the node's pods, of any
	// driver: which drivers are limited depends on the plan's snapshot.
	attachments []volumes.Attachment
	// namespaces are those of the node's pods, each once.
	namespaces []string
}

func newNodeBase(in *Node, vols map[string]volumes.Usage) nodeBase {
	b := nodeBase{capacity: resources.FromResourceList(in.Allocatable)}
	for _, pod := range in.Pods {
		b.used = b.used.Add(resources.PodRequests(pod))
		b.hostPorts = append(b.hostPorts, pods.HostPorts(pod)...)
		if u, ok := usageOf(vols, pod); ok {
			b.attachments = append(b.attachments, u.Attachments...)
		}
		if !slices.Contains(b.namespaces, pod.Namespace) {
			b.namespaces = append(b.namespaces, pod.Namespace)
		}
		i := slices.IndexFunc(b.podSets, func(ps podSet) bool {
			return ps.namespace == pod.Namespace && maps.Equal(ps.labels, labels.Set(pod.Labels))
		})
		if i < 0 {
			i = len(b.podSets)
			b.podSets = append(b.podSets, podSet{namespace: pod.Namespace, labels: pod.Labels})
		}
		b.podSets[i].count++
	}
	return b
}

// Share builds what plans of snap's NodePools and DaemonSets share, and
// what snap.Nodes bring to a plan that has them. A plan may have other
// nodes too; those it works out itself.
//
// When snap.Shared is already set (for the same NodePools and DaemonSets),
// its pools are kept and only the nodes are worked out: a caller that
// plans many snapshots of one configuration builds the pools once.
func Share(snap Snapshot) *Shared {
	var sh *Shared
	if snap.Shared != nil {
		cp := *snap.Shared
		sh = &cp
	} else {
		s := &solver{topo: newTopology()}
		s.knownKeys = knownLabelKeys(snap.NodePools)
		s.buildPools(snap)
		sh = &Shared{pools: s.pools, daemons: s.daemons, knownKeys: s.knownKeys, domains: s.topo.domains, nextType: s.nextType}
	}
	sh.nodes = make(map[*Node]nodeBase, len(snap.Nodes))
	for _, n := range snap.Nodes {
		sh.nodes[n] = newNodeBase(n, snap.Volumes)
	}
	return sh
}

// adopt starts s from sh: the pools are copied, as a plan counts their
// usage against limits; the types, DaemonSets and known keys are only read.
func (s *solver) adopt(sh *Shared) {
	s.shared = sh
	s.knownKeys, s.daemons, s.nextType = sh.knownKeys, sh.daemons, sh.nextType
	for k, vs := range sh.domains {
		d := make(map[string]struct{}, len(vs))
		for v := range vs {
			d[v] = struct{}{}
		}
		s.topo.domains[k] = d
	}
	s.pools = make([]*pool, len(sh.pools))
	for i, p := range sh.pools {
		cp := *p
		if p.acct != nil {
			acct := *p.acct
			cp.acct = &acct
		}
		s.pools[i] = &cp
	}
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
	// A NodePool's commitment pools share its account.
	accounts := map[*v1.NodePool]*account{}
	for _, in := range snap.NodePools {
		np := in.NodePool
		p := &pool{idx: len(s.pools), name: np.Name, np: np, limits: corev1.ResourceList(np.Spec.Limits), taints: np.Spec.Template.Spec.Taints}
		if dollars, ok, err := spendcap.Of(np); err != nil {
			p.err = err
			s.pools = append(s.pools, p)
			continue
		} else if ok {
			// The cap is one more limit (spendcap.Resource); the
			// NodePool's own map is the cache's, so it is copied.
			p.limits = corev1.ResourceList(np.Spec.Limits).DeepCopy()
			if p.limits == nil {
				p.limits = corev1.ResourceList{}
			}
			p.limits[spendcap.Resource] = spendcap.Limit(dollars)
			p.spendCap = true
		}
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
		if p.acct = accounts[np]; p.acct == nil {
			p.acct = &account{usage: resources.FromResourceList(in.InUse)}
			if n, ok := in.InUse["nodes"]; ok {
				p.acct.nodes = n.Value()
			}
			accounts[np] = p.acct
		}
		if in.room != nil {
			s.roomPool(p, in.room)
		}
		zones, cts := map[string]struct{}{}, map[string]struct{}{}
		for _, it := range in.InstanceTypes {
			t := s.buildType(p, it)
			if t == nil {
				continue
			}
			if in.room != nil {
				takes := roomTakes(it, in.room.id)
				t.cap = t.cap.With(roomResource(in.room.id), takes)
				if p.fewest == 0 || takes < p.fewest {
					p.fewest = takes
				}
				// An RI's room costs nothing, but its units are scarce: a
				// token per unit packs them densely.
				t.price = max(t.price, 1e-12*float64(takes))
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
	price, dearest := math.Inf(1), 0.0
	for _, o := range it.Offerings {
		if !o.Available || (zoneReq != nil && !zoneReq.Has(o.Zone)) || (ctReq != nil && !ctReq.Has(o.CapacityType)) {
			continue
		}
		zones[o.Zone] = struct{}{}
		cts[o.CapacityType] = struct{}{}
		price = math.Min(price, o.Price)
		dearest = math.Max(dearest, o.Price)
	}
	if len(zones) == 0 {
		return nil
	}
	reqs := it.LabelRequirements().Copy()
	reqs[corev1.LabelTopologyZone] = requirements.InSet(corev1.LabelTopologyZone, zones)
	reqs[v1.LabelCapacityType] = requirements.InSet(v1.LabelCapacityType, cts)
	if err := s.typeCompatible(p.reqs, reqs); err != nil {
		return nil
	}
	s.nextType++
	t := &itype{id: s.nextType, it: it, reqs: reqs, alloc: resources.FromResourceList(it.Allocatable), cap: resources.FromResourceList(it.Capacity), price: price}
	if p.spendCap {
		// A node counts against the cap at the dearest offering it may
		// land on: a launch can fall back from spot to on-demand.
		t.cap = t.cap.With(spendcap.Resource, spendcap.Micro(dearest))
	}
	t.overhead = typeOverhead(p.daemons, p.reqs, reqs)
	t.free = t.alloc.Sub(t.overhead)
	return t
}

func (s *solver) buildExisting(nodes []*Node, daemons []*daemon) {
	for _, in := range nodes {
		base, ok := nodeBase{}, false
		if s.shared != nil {
			base, ok = s.shared.nodes[in]
		}
		if !ok {
			base = newNodeBase(in, s.volumes.byPod)
		}
		n := &node{name: in.Name, existing: true, deleting: in.MarkedForDeletion,
			capacity: base.capacity}
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
		n.used = n.used.Add(base.used)
		// Clipped, so that a plan's appends copy rather than share; the
		// plan removes a pod only into a copy too (squeeze).
		n.pods = slices.Clip(in.Pods)
		n.hostPorts = slices.Clip(base.hostPorts)
		n.podSets, n.labels = base.podSets, in.Labels
		s.attachExisting(n, in, base.attachments)
		for _, ns := range base.namespaces {
			s.addNamespace(ns, nil)
		}
		s.topo.nodeLabels = append(s.topo.nodeLabels, in.Labels)
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
			d, ok := n.domain(g.key)
			if !ok || !g.filter.passes(n) {
				continue
			}
			for _, ps := range n.podSets {
				if g.matches(ps.namespace, ps.labels) {
					g.counts[d] += ps.count
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
// any instance type that could hold it, at list prices: a commitment's
// room (roompools.go) would value every pod it fits at nearly nothing,
// and the lookahead weighs types by the value they hold.
func (s *solver) value(pg *podGroup) {
	if pg.err != nil || len(pg.variants) == 0 {
		return
	}
	if pg.shape.valued {
		pg.value = pg.shape.value
		return
	}
	pg.shape.valued = true
	best := math.Inf(1)
	for _, p := range s.pools {
		if p.err == nil && p.room == "" && s.groupPoolCompatible(pg, p) {
			best = min(best, s.poolValue(pg, p))
		}
	}
	if !math.IsInf(best, 1) {
		pg.value = best
		pg.shape.value = best
	}
}

// poolValue is one pod of pg's share of the most price-efficient type of
// pool p that holds it, +Inf when none does.
func (s *solver) poolValue(pg *podGroup, p *pool) float64 {
	best := math.Inf(1)
	for _, t := range p.types {
		if s.groupTypeCompatible(pg, p, t) && pg.requests.Fits(t.free) {
			best = min(best, t.price*pg.requests.Fraction(t.free))
		}
	}
	return best
}
