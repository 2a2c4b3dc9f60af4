package scheduling

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

type topoKind int

const (
	topoSpread topoKind = iota
	topoAffinity
	topoAntiAffinity
)

func (k topoKind) String() string {
	return [...]string{"topology spread", "pod affinity", "pod anti-affinity"}[k]
}

// topoGroup counts, per topology domain, the pods that match one constraint's
// selector. Constraints that are the same (same kind, key, namespaces,
// selector and skew) share a group, so a thousand replicas with one spread
// constraint cost one counter, not a thousand.
type topoGroup struct {
	kind       topoKind
	key        string
	namespaces map[string]struct{} // nil: all namespaces
	selector   labels.Selector
	maxSkew    int32
	minDomains int32
	// counts of pods matching the selector, per domain.
	counts map[string]int
	// owners counts pods that carry this anti-affinity term, per domain, for
	// the inverse check: a pod matching the selector may not join them.
	owners map[string]int
	desc   string
	// filter, for a spread constraint, picks the nodes whose pods count and
	// whose domains are eligible: kube-scheduler's nodeAffinityPolicy and
	// nodeTaintsPolicy. nil: every node.
	filter *nodeFilter
	// eligible caches the domains of key that nodes passing filter have or
	// can have (see eligibleDomains).
	eligible map[string]struct{}
	// ownerGroups are the pending groups whose own hostname anti-affinity or
	// spread this is, and which it therefore keeps apart.
	ownerGroups []*podGroup
}

const hostnameKey = corev1.LabelHostname

func (g *topoGroup) matches(namespace string, podLabels labels.Set) bool {
	if g.namespaces != nil {
		if _, ok := g.namespaces[namespace]; !ok {
			return false
		}
	}
	return g.selector.Matches(podLabels)
}

// topology holds every group and the domains each key can take.
type topology struct {
	groups  map[string]*topoGroup
	ordered []*topoGroup
	// domains per key: the values nodes can take, e.g. every zone offered.
	domains map[string]map[string]struct{}
	// eligible are the eligible domains of filtered spreads, by filter and key.
	eligible map[string]map[string]struct{}
	// nodeLabels are the existing nodes' labels. Their values join domains
	// only for a key some constraint asks about (keyDomains): adding every
	// label of 2,000 nodes to domains was a tenth of a repack search, whose
	// plans rarely ask about more than a key or two.
	nodeLabels []map[string]string
	folded     map[string]bool
}

// keyDomains are the domains of key: those offered and those of the
// existing nodes.
func (t *topology) keyDomains(key string) map[string]struct{} {
	if !t.folded[key] {
		t.folded[key] = true
		for _, l := range t.nodeLabels {
			if v, ok := l[key]; ok {
				t.addDomain(key, v)
			}
		}
	}
	return t.domains[key]
}

func newTopology() *topology {
	return &topology{groups: map[string]*topoGroup{}, domains: map[string]map[string]struct{}{}, eligible: map[string]map[string]struct{}{},
		folded: map[string]bool{}}
}

func (t *topology) addDomain(key, value string) {
	d, ok := t.domains[key]
	if !ok {
		d = map[string]struct{}{}
		t.domains[key] = d
	}
	d[value] = struct{}{}
}

// group returns the shared group for a constraint, creating it.
func (t *topology) group(kind topoKind, key string, namespaces map[string]struct{}, sel *metav1.LabelSelector, maxSkew, minDomains int32) (*topoGroup, error) {
	return t.filteredGroup(kind, key, namespaces, sel, maxSkew, minDomains, nil)
}

// filteredGroup is group for a constraint that counts only the nodes filter
// passes.
func (t *topology) filteredGroup(kind topoKind, key string, namespaces map[string]struct{}, sel *metav1.LabelSelector, maxSkew, minDomains int32, filter *nodeFilter) (*topoGroup, error) {
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector in %s on %q: %w", kind, key, err)
	}
	if sel == nil {
		// A nil selector matches nothing in affinity terms and spread constraints.
		selector = labels.Nothing()
	}
	var ns []string
	for n := range namespaces {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	id := fmt.Sprintf("%d|%s|%s|%s|%d|%d", kind, key, strings.Join(ns, ","), selector.String(), maxSkew, minDomains)
	if namespaces == nil {
		id += "|*"
	}
	if filter != nil {
		id += "|" + filter.id
	}
	if g, ok := t.groups[id]; ok {
		return g, nil
	}
	g := &topoGroup{kind: kind, key: requirements.NormalizeKey(key), namespaces: namespaces, selector: selector, maxSkew: maxSkew, minDomains: minDomains,
		counts: map[string]int{}, owners: map[string]int{}, filter: filter}
	g.desc = fmt.Sprintf("%s on %s (%s)", kind, g.key, selector.String())
	t.groups[id] = g
	t.ordered = append(t.ordered, g)
	return g, nil
}

// domainsOf returns the domains a node can be in for key: one for a decided
// node, several while a new node's zone is open. hostname is always the
// node's own name.
func (n *node) domainsOf(key string) []string {
	if key == corev1.LabelHostname {
		return []string{n.name}
	}
	if n.existing {
		return n.labelValues(key)
	}
	r, ok := n.requirements[key]
	if !ok {
		return nil
	}
	return r.Values()
}

// allowedDomains returns the domains of key on node n that the pod's
// topology constraints allow, or an error saying which constraint failed.
// eligible are the domains the pod may use at all (its own node affinity).
func (s *solver) allowedDomains(pc *podConstraints, pg *podGroup, n *node, key string) ([]string, error) {
	candidates := n.domainsOf(key)
	if len(candidates) == 0 {
		return nil, fmt.Errorf("node has no %s label", key)
	}
	allowed := candidates
	filter := func(keep func(d string) bool) {
		out := allowed[:0:0]
		for _, d := range allowed {
			if keep(d) {
				out = append(out, d)
			}
		}
		allowed = out
	}
	for _, g := range pc.spreads {
		if g.key != key {
			continue
		}
		self := 0
		if g.matches(pg.namespace, pg.labels) {
			self = 1
		}
		min := s.minCount(g)
		filter(func(d string) bool { return g.counts[d]+self-min <= int(g.maxSkew) })
		if len(allowed) == 0 {
			return nil, fmt.Errorf("would violate %s (maxSkew %d)", g.desc, g.maxSkew)
		}
	}
	for _, g := range pc.affinity {
		if g.key != key {
			continue
		}
		if s.anyCount(g) {
			filter(func(d string) bool { return g.counts[d] > 0 })
		} else if !g.matches(pg.namespace, pg.labels) {
			return nil, fmt.Errorf("no pod matches %s", g.desc)
		}
		if len(allowed) == 0 {
			return nil, fmt.Errorf("would violate %s", g.desc)
		}
	}
	for _, g := range pc.antiAffinity {
		if g.key != key {
			continue
		}
		filter(func(d string) bool { return g.counts[d] == 0 })
		if len(allowed) == 0 {
			return nil, fmt.Errorf("would violate %s", g.desc)
		}
	}
	for _, g := range pg.inverseAnti {
		if g.key != key {
			continue
		}
		filter(func(d string) bool { return g.owners[d] == 0 })
		if len(allowed) == 0 {
			return nil, fmt.Errorf("would violate the %s of another pod", g.desc)
		}
	}
	return allowed, nil
}

// minCount is the smallest count among the constraint's eligible domains.
// For hostname it is 0: a new node is always a possible empty domain.
func (s *solver) minCount(g *topoGroup) int {
	if g.key == corev1.LabelHostname {
		return 0
	}
	eligible := s.eligibleDomains(g)
	min := -1
	for d := range eligible {
		if c := g.counts[d]; min < 0 || c < min {
			min = c
		}
	}
	if min < 0 || (g.minDomains > 0 && len(eligible) < int(g.minDomains)) {
		return 0
	}
	return min
}

// eligibleDomains are the domains of a spread constraint's key that count
// for its skew: as in kube-scheduler, those of the nodes its filter passes,
// and, as new nodes may open them, those of the instance types its filter
// passes in each NodePool. Without a filter, every domain known.
func (s *solver) eligibleDomains(g *topoGroup) map[string]struct{} {
	if g.filter == nil {
		return s.topo.keyDomains(g.key)
	}
	if g.eligible != nil {
		return g.eligible
	}
	// Constraints with the same filter and key share the answer.
	shared := g.filter.id + "|" + g.key
	if e, ok := s.topo.eligible[shared]; ok {
		g.eligible = e
		return e
	}
	g.eligible = map[string]struct{}{}
	s.topo.eligible[shared] = g.eligible
	for _, n := range s.existing {
		if d, ok := n.domain(g.key); ok && g.filter.passes(n) {
			g.eligible[d] = struct{}{}
		}
	}
	for _, p := range s.pools {
		if p.err != nil || !g.filter.tolerates(p.taints) {
			continue
		}
		for _, t := range p.types {
			for _, d := range typeDomains(p, t, g.key) {
				if _, seen := g.eligible[d]; !seen && g.filter.admits(p.reqs, t.reqs, g.key, d) {
					g.eligible[d] = struct{}{}
				}
			}
		}
	}
	return g.eligible
}

// typeDomains are the values key can take on a new node of type t in pool p.
func typeDomains(p *pool, t *itype, key string) []string {
	r, ok := p.reqs[key]
	if tr, tok := t.reqs[key]; tok {
		if ok {
			r = r.Intersect(tr)
		} else {
			r, ok = tr, true
		}
	}
	if !ok {
		return nil
	}
	return r.Values()
}

// nodeFilter is which nodes a topology spread constraint counts, after
// kube-scheduler's node inclusion policies: with nodeAffinityPolicy Honor
// (the default), only nodes matching the pod's nodeSelector and required
// node affinity; with nodeTaintsPolicy Honor, only nodes whose NoSchedule
// and NoExecute taints the pod tolerates.
type nodeFilter struct {
	// terms are the pod's required node affinity, its nodeSelector merged
	// into each term; a node matching any of them passes. nil: not honoured.
	terms []requirements.Requirements
	// honourTaints with the pod's tolerations.
	honourTaints bool
	tolerations  []corev1.Toleration
	// id tells filters apart in group identities.
	id string
}

// newNodeFilter returns the filter of a spread constraint of a pod with the
// given required node-affinity terms and tolerations, or nil when every node
// counts.
func newNodeFilter(tsc corev1.TopologySpreadConstraint, terms []requirements.Requirements, tolerations []corev1.Toleration) *nodeFilter {
	f := &nodeFilter{}
	if tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		for _, t := range terms {
			if len(t) > 0 {
				f.terms = terms
				break
			}
		}
	}
	f.honourTaints = tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
	if f.terms == nil && !f.honourTaints {
		return nil
	}
	var parts []string
	for _, t := range f.terms {
		parts = append(parts, t.String())
	}
	f.id = "affinity:" + strings.Join(parts, " or ")
	if f.honourTaints {
		f.tolerations = tolerations
		tol, _ := json.Marshal(tolerations)
		f.id += "|taints:" + string(tol)
	}
	return f
}

// tolerates reports whether the filter lets nodes with taints count.
func (f *nodeFilter) tolerates(taints []corev1.Taint) bool {
	if !f.honourTaints {
		return true
	}
	pg := podGroup{tolerations: f.tolerations}
	return pg.untolerated(taints, true) == nil
}

// passes reports whether the pods on n count. A new node is judged by its
// pool and instance type, which do not change as pods join it, so that a
// pod counted on it is uncounted the same way.
func (f *nodeFilter) passes(n *node) bool {
	if f == nil {
		return true
	}
	if !f.tolerates(n.taints) {
		return false
	}
	if f.terms == nil {
		return true
	}
	for _, t := range f.terms {
		if n.existing && requirements.LabelsCompatible(n.labels, t) == nil {
			return true
		}
		if !n.existing && labelsCompatible(n.pool.reqs, n.target.reqs, t) == nil {
			return true
		}
	}
	return false
}

// admits reports whether a new node of a pool and type, in domain d of
// key (one of typeDomains), could pass the filter's node affinity.
func (f *nodeFilter) admits(poolReqs, typeReqs requirements.Requirements, key, d string) bool {
	if f.terms == nil {
		return true
	}
	for _, t := range f.terms {
		ok := true
		for k, p := range t {
			if k == key {
				ok = p.Has(d)
			} else {
				ok = keyCompatible(poolReqs, typeReqs, k, p) == nil
			}
			if !ok {
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (s *solver) anyCount(g *topoGroup) bool {
	for _, c := range g.counts {
		if c > 0 {
			return true
		}
	}
	return false
}

// topologyKeys lists the keys a pod's placement must decide a domain for:
// its own constraints and the groups it counts towards.
func (pc *podConstraints) topologyKeys(pg *podGroup) []string {
	if pc.keys != nil {
		return pc.keys
	}
	seen := map[string]struct{}{}
	var keys []string
	add := func(gs []*topoGroup) {
		for _, g := range gs {
			if _, ok := seen[g.key]; !ok {
				seen[g.key] = struct{}{}
				keys = append(keys, g.key)
			}
		}
	}
	add(pc.spreads)
	add(pc.affinity)
	add(pc.antiAffinity)
	add(pg.inverseAnti)
	add(pg.matchedBy)
	add(pg.ownedAnti)
	sort.Strings(keys)
	if keys == nil {
		keys = []string{}
	}
	pc.keys = keys
	return keys
}
