package scheduling

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// podGroup is a set of pending pods that schedule identically: same
// namespace, labels, requests and constraints, typically the replicas of one
// workload. Analysis, compatibility checks and topology matching run once per
// group, which is what makes thousands of replicas cheap.
type podGroup struct {
	id        int
	namespace string
	labels    labels.Set
	requests  resources.Resources
	// tolerations decide which taints the pods accept.
	tolerations []corev1.Toleration
	hostPorts   []pods.HostPort
	// variants is the relaxation ladder: the strictest constraints first,
	// then with required terms and preferences dropped in Karpenter's order.
	variants []*podConstraints
	// matchedBy are the topology groups whose selector matches these pods;
	// placing one increments their counts.
	matchedBy []*topoGroup
	// inverseAnti are anti-affinity groups of other pods that these pods
	// match: they may not join the owners' domains.
	inverseAnti []*topoGroup
	// ownedAnti are the required anti-affinity terms these pods carry.
	ownedAnti []*topoGroup
	// perNodeLimit caps how many of these pods one node can take because of
	// hostname anti-affinity or spread; 0 means no cap.
	perNodeLimit int64
	// err marks pods that cannot be scheduled at all, with the reason.
	err  error
	pods []*corev1.Pod
	// value is a lower bound of what one pod costs to run ($/h): its share
	// of the most price-efficient instance type that can hold it. It ranks
	// how well a node type would be used.
	value float64
	// remaining counts pods of the group not yet placed.
	remaining int
	shape     *shape
	// attachments are the volumes each pod attaches where a limit applies.
	attachments []volumes.Attachment
}

// podConstraints are the constraints a placement attempt enforces.
type podConstraints struct {
	// keys caches topologyKeys.
	keys                     []string
	nodeReqs                 requirements.Requirements
	spreads                  []*topoGroup
	affinity                 []*topoGroup
	antiAffinity             []*topoGroup
	toleratePreferNoSchedule bool
	// relaxed says what this variant dropped, for explanations.
	relaxed string
}

// groupKey identifies pods that schedule identically: a digest of every
// field a placement reads. The API types' generated protobuf encoding
// stands for each structured field; it is exact and several times faster
// than JSON, which took 10% of a 5,000-pod plan.
func groupKey(pod *corev1.Pod) string {
	k := keyHash{Hash64: fnv.New64a()}
	k.str(pod.Namespace)
	k.strings(pod.Labels)
	k.strings(pod.Spec.NodeSelector)
	if a := pod.Spec.Affinity; a != nil {
		k.proto(a)
	} else {
		k.str("")
	}
	k.count(len(pod.Spec.Tolerations))
	for i := range pod.Spec.Tolerations {
		k.proto(&pod.Spec.Tolerations[i])
	}
	k.count(len(pod.Spec.TopologySpreadConstraints))
	for i := range pod.Spec.TopologySpreadConstraints {
		k.proto(&pod.Spec.TopologySpreadConstraints[i])
	}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		k.count(len(cs))
		for i := range cs {
			k.proto(&cs[i])
		}
	}
	k.count(len(pod.Spec.Overhead))
	for _, name := range slices.Sorted(maps.Keys(pod.Spec.Overhead)) {
		q := pod.Spec.Overhead[name]
		k.str(string(name))
		k.str(q.String())
	}
	if r := pod.Spec.Resources; r != nil {
		k.proto(r)
	} else {
		k.str("")
	}
	k.count(len(pod.Spec.ResourceClaims))
	return strconv.FormatUint(k.Sum64(), 36)
}

// keyHash writes each part length-first, so that no two sequences of parts
// write the same bytes.
type keyHash struct{ hash.Hash64 }

func (k keyHash) count(n int) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	_, _ = k.Write(b[:])
}

func (k keyHash) str(s string) {
	k.count(len(s))
	_, _ = io.WriteString(k, s)
}

func (k keyHash) strings(m map[string]string) {
	k.count(len(m))
	for _, key := range slices.Sorted(maps.Keys(m)) {
		k.str(key)
		k.str(m[key])
	}
}

func (k keyHash) proto(m interface{ Marshal() ([]byte, error) }) {
	b, err := m.Marshal()
	if err != nil {
		// Never for an object the API server or a manifest decoded.
		b = []byte(err.Error())
	}
	k.count(len(b))
	_, _ = k.Write(b)
}

// ErrResourceClaims is why a pod with DRA resource claims is not planned
// for. The words are Karpenter's (IGNORE_DRA_REQUESTS=true), so the pod's
// FailedScheduling event reads the same under either.
var ErrResourceClaims = errors.New("pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter")

// analyze builds the group of a pod (the first pod of its kind).
func (s *solver) analyze(pod *corev1.Pod) *podGroup {
	pg := &podGroup{namespace: pod.Namespace, labels: labels.Set(pod.Labels), requests: resources.PodRequests(pod), tolerations: pod.Spec.Tolerations}
	if pods.HasResourceClaims(pod) {
		pg.err = ErrResourceClaims
		return pg
	}
	pg.hostPorts = pods.HostPorts(pod)
	variants, err := s.constraintLadder(withLabelKeys(pod), pg)
	if err != nil {
		pg.err = err
		return pg
	}
	pg.variants = variants
	return pg
}

type relaxation struct {
	what  string
	apply func(pc *podConstraints) error
}

func (s *solver) constraintLadder(pod *corev1.Pod, pg *podGroup) ([]*podConstraints, error) {
	base := requirements.Requirements{}
	for k, v := range pod.Spec.NodeSelector {
		base.Add(requirements.In(requirements.NormalizeKey(k), v))
	}
	if r, ok := base[v1.LabelNodePool]; ok && r.Empty() {
		return nil, errors.New(`pod requires label "karpenter.sh/nodepool" to be absent, so no NodePool may run it`)
	}
	aff := pod.Spec.Affinity
	var required *corev1.NodeSelector
	if aff != nil && aff.NodeAffinity != nil {
		required = aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	terms, err := requiredTerms(base, required)
	if err != nil {
		return nil, err
	}
	// Topology spread counts the nodes matching the pod's own affinity, as
	// kube-scheduler does, not the narrower set its volumes allow.
	filterTerms := terms
	if u, ok := usageOf(s.volumes.byPod, pod); ok && u.Injected {
		if filterTerms, err = requiredTerms(base, u.OwnAffinity); err != nil {
			return nil, err
		}
	}

	// Under PREFERENCE_POLICY=Ignore preferences are never built, so they
	// neither constrain the pod nor count in anyone's topology.
	ignore := s.opts.PreferencePolicy == PreferencePolicyIgnore

	// Required pod-level topology: always enforced.
	var spreads, affinity, anti []*topoGroup
	var prefs []relaxation
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		if ignore && tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			continue
		}
		sel := tsc.LabelSelector
		if len(tsc.MatchLabelKeys) > 0 && sel != nil {
			sel = sel.DeepCopy()
			for _, k := range tsc.MatchLabelKeys {
				if v, ok := pod.Labels[k]; ok {
					sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
				}
			}
		}
		minDomains := int32(0)
		if tsc.MinDomains != nil {
			minDomains = *tsc.MinDomains
		}
		g, err := s.topo.filteredGroup(topoSpread, tsc.TopologyKey, map[string]struct{}{pod.Namespace: {}}, sel, tsc.MaxSkew, minDomains, newNodeFilter(tsc, filterTerms, pod.Spec.Tolerations))
		if err != nil {
			return nil, err
		}
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			prefs = append(prefs, relaxation{"preferred topology spread on " + tsc.TopologyKey, func(pc *podConstraints) error { pc.spreads = append(pc.spreads, g); return nil }})
			continue
		}
		spreads = append(spreads, g)
		if g.key == corev1.LabelHostname && g.matches(pod.Namespace, labels.Set(pod.Labels)) {
			pg.limitPerNode(int64(g.maxSkew))
			g.ownerGroups = append(g.ownerGroups, pg)
		}
	}
	var prefAffinity, prefAnti []relaxation
	if aff != nil && aff.PodAffinity != nil {
		for _, term := range aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			g, err := s.topo.group(topoAffinity, term.TopologyKey, s.termNamespaces(pod.Namespace, term), term.LabelSelector, 0, 0)
			if err != nil {
				return nil, err
			}
			affinity = append(affinity, g)
		}
		for _, wt := range sortedWeighted(aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) {
			if ignore {
				break
			}
			g, err := s.topo.group(topoAffinity, wt.PodAffinityTerm.TopologyKey, s.termNamespaces(pod.Namespace, wt.PodAffinityTerm), wt.PodAffinityTerm.LabelSelector, 0, 0)
			if err != nil {
				return nil, err
			}
			prefAffinity = append(prefAffinity, relaxation{"preferred pod affinity on " + g.key, func(pc *podConstraints) error { pc.affinity = append(pc.affinity, g); return nil }})
		}
	}
	if aff != nil && aff.PodAntiAffinity != nil {
		for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			g, err := s.topo.group(topoAntiAffinity, term.TopologyKey, s.termNamespaces(pod.Namespace, term), term.LabelSelector, 0, 0)
			if err != nil {
				return nil, err
			}
			anti = append(anti, g)
			pg.ownedAnti = append(pg.ownedAnti, g)
			if g.key == corev1.LabelHostname && g.matches(pod.Namespace, labels.Set(pod.Labels)) {
				pg.limitPerNode(1)
				g.ownerGroups = append(g.ownerGroups, pg)
			}
		}
		for _, wt := range sortedWeighted(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) {
			if ignore {
				break
			}
			g, err := s.topo.group(topoAntiAffinity, wt.PodAffinityTerm.TopologyKey, s.termNamespaces(pod.Namespace, wt.PodAffinityTerm), wt.PodAffinityTerm.LabelSelector, 0, 0)
			if err != nil {
				return nil, err
			}
			prefAnti = append(prefAnti, relaxation{"preferred pod anti-affinity on " + g.key, func(pc *podConstraints) error { pc.antiAffinity = append(pc.antiAffinity, g); return nil }})
		}
	}
	// Karpenter relaxes in this order: preferred pod affinity, preferred pod
	// anti-affinity, preferred node affinity (heaviest first), ScheduleAnyway
	// spreads, then PreferNoSchedule taints.
	ordered := append(append([]relaxation{}, prefAffinity...), prefAnti...)
	if aff != nil && aff.NodeAffinity != nil && !ignore {
		pref := append([]corev1.PreferredSchedulingTerm{}, aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
		sort.SliceStable(pref, func(i, j int) bool { return pref[i].Weight > pref[j].Weight })
		for _, p := range pref {
			r, err := nodeSelectorTermRequirements(p.Preference)
			if err != nil {
				return nil, err
			}
			ordered = append(ordered, relaxation{fmt.Sprintf("preferred node affinity (weight %d)", p.Weight), func(pc *podConstraints) error {
				pc.nodeReqs = pc.nodeReqs.Merge(r)
				return nil
			}})
		}
	}
	ordered = append(ordered, prefs...)

	var ladder []*podConstraints
	build := func(reqs requirements.Requirements, keep []relaxation, relaxed string) *podConstraints {
		pc := &podConstraints{nodeReqs: reqs, spreads: spreads, affinity: affinity, antiAffinity: anti, relaxed: relaxed}
		pc.spreads = append([]*topoGroup{}, spreads...)
		pc.affinity = append([]*topoGroup{}, affinity...)
		pc.antiAffinity = append([]*topoGroup{}, anti...)
		for _, r := range keep {
			_ = r.apply(pc)
		}
		return pc
	}
	for i, t := range terms {
		relaxed := ""
		if i > 0 {
			relaxed = fmt.Sprintf("required node affinity term %d", i+1)
		}
		ladder = append(ladder, build(t, ordered, relaxed))
	}
	last := terms[len(terms)-1]
	for k := 1; k <= len(ordered); k++ {
		ladder = append(ladder, build(last, ordered[k:], "dropped "+ordered[k-1].what))
	}
	final := build(last, nil, "all preferences dropped, PreferNoSchedule taints tolerated")
	final.toleratePreferNoSchedule = true
	ladder = append(ladder, final)
	return ladder, nil
}

// requiredTerms are the ORed terms of a required node affinity, each with
// the nodeSelector merged in; without terms, the nodeSelector alone.
func requiredTerms(base requirements.Requirements, required *corev1.NodeSelector) ([]requirements.Requirements, error) {
	var terms []requirements.Requirements
	if required != nil {
		for _, term := range required.NodeSelectorTerms {
			if len(term.MatchFields) > 0 {
				return nil, errors.New("node affinity with matchFields is not supported; use matchExpressions on node labels")
			}
			r, err := nodeSelectorTermRequirements(term)
			if err != nil {
				return nil, err
			}
			terms = append(terms, base.Merge(r))
		}
	}
	if len(terms) == 0 {
		terms = []requirements.Requirements{base}
	}
	return terms, nil
}

func (pg *podGroup) limitPerNode(n int64) {
	if n < 1 {
		n = 1
	}
	if pg.perNodeLimit == 0 || n < pg.perNodeLimit {
		pg.perNodeLimit = n
	}
}

func sortedWeighted(in []corev1.WeightedPodAffinityTerm) []corev1.WeightedPodAffinityTerm {
	out := append([]corev1.WeightedPodAffinityTerm{}, in...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Weight > out[j].Weight })
	return out
}

func nodeSelectorTermRequirements(term corev1.NodeSelectorTerm) (requirements.Requirements, error) {
	out := requirements.Requirements{}
	for _, e := range term.MatchExpressions {
		r, err := requirements.NewRequirement(requirements.NormalizeKey(e.Key), e.Operator, e.Values...)
		if err != nil {
			return nil, fmt.Errorf("node affinity: %w", err)
		}
		out.Add(r)
	}
	return out, nil
}

// tolerates reports the first taint in taints the group does not tolerate.
func (pg *podGroup) untolerated(taints []corev1.Taint, preferNoScheduleOK bool) *corev1.Taint {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && preferNoScheduleOK {
			continue
		}
		tolerated := false
		for j := range pg.tolerations {
			if pg.tolerations[j].ToleratesTaint(nopLogger, t, true) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return t
		}
	}
	return nil
}

// withLabelKeys returns the pod with the matchLabelKeys and
// mismatchLabelKeys of its pod (anti-)affinity terms merged into their
// label selectors as "key in (value)" and "key notin (value)", which is
// what kube-apiserver does when it admits a pod (Kubernetes 1.31 and
// later). Pods read from the API already carry the merged requirements;
// one already present is not added again, so merging twice changes
// nothing. Pods from manifests need it.
func withLabelKeys(pod *corev1.Pod) *corev1.Pod {
	a := pod.Spec.Affinity
	if a == nil || !hasLabelKeys(a) {
		return pod
	}
	out := *pod
	out.Spec.Affinity = a.DeepCopy()
	merge := func(t *corev1.PodAffinityTerm) {
		if t.LabelSelector == nil {
			return // the API server rejects label keys without a selector
		}
		for _, k := range t.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				addExpression(t.LabelSelector, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
		for _, k := range t.MismatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				addExpression(t.LabelSelector, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{v}})
			}
		}
	}
	each := func(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) {
		for i := range req {
			merge(&req[i])
		}
		for i := range pref {
			merge(&pref[i].PodAffinityTerm)
		}
	}
	if pa := out.Spec.Affinity.PodAffinity; pa != nil {
		each(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if pa := out.Spec.Affinity.PodAntiAffinity; pa != nil {
		each(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return &out
}

func hasLabelKeys(a *corev1.Affinity) bool {
	has := func(t corev1.PodAffinityTerm) bool { return len(t.MatchLabelKeys) > 0 || len(t.MismatchLabelKeys) > 0 }
	inTerms := func(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) bool {
		for _, t := range req {
			if has(t) {
				return true
			}
		}
		for _, t := range pref {
			if has(t.PodAffinityTerm) {
				return true
			}
		}
		return false
	}
	return (a.PodAffinity != nil && inTerms(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)) ||
		(a.PodAntiAffinity != nil && inTerms(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution))
}

// addExpression adds r to sel unless an identical requirement is there.
func addExpression(sel *metav1.LabelSelector, r metav1.LabelSelectorRequirement) {
	for _, e := range sel.MatchExpressions {
		if e.Key == r.Key && e.Operator == r.Operator && slices.Equal(e.Values, r.Values) {
			return
		}
	}
	sel.MatchExpressions = append(sel.MatchExpressions, r)
}
