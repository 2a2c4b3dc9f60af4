package scheduling

import (
	"fmt"
	"sort"
	"strings"

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
}

func newTopology() *topology {
	return &topology{groups: map[string]*topoGroup{}, domains: map[string]map[string]struct{}{}}
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
	if g, ok := t.groups[id]; ok {
		return g, nil
	}
	g := &topoGroup{kind: kind, key: NormalizeKey(key), namespaces: namespaces, selector: selector, maxSkew: maxSkew, minDomains: minDomains,
		counts: map[string]int{}, owners: map[string]int{}}
	g.desc = fmt.Sprintf("%s on %s (%s)", kind, g.key, selector.String())
	t.groups[id] = g
	t.ordered = append(t.ordered, g)
	return g, nil
}

// termNamespaces resolves the namespaces an affinity term applies to. An
// empty namespaceSelector means all namespaces; a non-empty one needs
// Namespace objects, which the snapshot does not hold, so it falls back to the
// listed namespaces plus the pod's own.
func termNamespaces(podNamespace string, term corev1.PodAffinityTerm) map[string]struct{} {
	if term.NamespaceSelector != nil && len(term.NamespaceSelector.MatchLabels) == 0 && len(term.NamespaceSelector.MatchExpressions) == 0 {
		return nil
	}
	out := map[string]struct{}{}
	for _, n := range term.Namespaces {
		out[n] = struct{}{}
	}
	if len(out) == 0 {
		out[podNamespace] = struct{}{}
	}
	return out
}

// domainsOf returns the domains a node can be in for key: one for a decided
// node, several while a new node's zone is open. hostname is always the
// node's own name.
func (n *node) domainsOf(key string) []string {
	if key == corev1.LabelHostname {
		return []string{n.name}
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
		min := s.minCount(g, pc)
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

// minCount is the smallest count among the domains the pod may use. For
// hostname it is 0: a new node is always a possible empty domain.
func (s *solver) minCount(g *topoGroup, pc *podConstraints) int {
	if g.key == corev1.LabelHostname {
		return 0
	}
	eligible := 0
	min := -1
	for d := range s.topo.domains[g.key] {
		if r, ok := pc.nodeReqs[g.key]; ok && !r.Has(d) {
			continue
		}
		eligible++
		if c := g.counts[d]; min < 0 || c < min {
			min = c
		}
	}
	if min < 0 || (g.minDomains > 0 && eligible < int(g.minDomains)) {
		return 0
	}
	return min
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
