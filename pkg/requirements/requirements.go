// Package requirements is the algebra of node label requirements: the set
// of values a label may take, intersected, compared and turned back into
// the API's node selector terms. It is the one evaluator of NodePool,
// NodeClaim and pod requirements; the planner, the cloud providers and
// disruption all use it, so they cannot disagree on which instance types
// a NodeClaim allows.
package requirements

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

// Requirement is the set of values a label may take. One type serves both
// sides of scheduling: for a node it is the set of values its label can still
// have (absent means the node will not carry the label); for a pod it is the
// predicate the node's label must satisfy.
type Requirement struct {
	Key string
	// complement: the set is "every value except values"; otherwise it is
	// exactly values.
	complement bool
	values     map[string]struct{}
	// greaterThan and lessThan are exclusive integer bounds; a bounded set
	// holds only integers.
	greaterThan, lessThan *int
	// absentOK: a node without the label satisfies this predicate
	// (NotIn and DoesNotExist, as in Kubernetes' node affinity).
	absentOK bool
	// MinValues asks for at least this many distinct values among a
	// NodeClaim's instance-type options.
	MinValues *int
}

// NewRequirement builds a requirement from a node selector operator.
func NewRequirement(key string, op corev1.NodeSelectorOperator, values ...string) (*Requirement, error) {
	r := &Requirement{Key: key}
	switch op {
	case corev1.NodeSelectorOpIn:
		r.values = setOf(values)
	case corev1.NodeSelectorOpNotIn:
		r.complement, r.values, r.absentOK = true, setOf(values), true
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
		r.absentOK = true
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
		if len(values) != 1 {
			return nil, fmt.Errorf("requirement %s %s needs exactly one integer value, got %d", key, op, len(values))
		}
		n, err := strconv.Atoi(values[0])
		if err != nil {
			return nil, fmt.Errorf("requirement %s %s needs an integer value, got %q", key, op, values[0])
		}
		r.complement = true
		switch op {
		case corev1.NodeSelectorOpGt:
			r.greaterThan = &n
		case v1.NodeSelectorOpGte:
			n--
			r.greaterThan = &n
		case corev1.NodeSelectorOpLt:
			r.lessThan = &n
		case v1.NodeSelectorOpLte:
			n++
			r.lessThan = &n
		}
	default:
		return nil, fmt.Errorf("requirement %s has unknown operator %q", key, op)
	}
	return r, nil
}

// In is the requirement that the label take one of values.
func In(key string, values ...string) *Requirement {
	return &Requirement{Key: key, values: setOf(values)}
}

// InSet is In for a set of values, which the requirement then owns.
func InSet(key string, values map[string]struct{}) *Requirement {
	return &Requirement{Key: key, values: values}
}

// AbsentOK reports whether a node without the label satisfies the
// requirement as a pod's predicate (NotIn and DoesNotExist).
func (r *Requirement) AbsentOK() bool { return r.absentOK }

// MustRequirement is NewRequirement for values known to be valid.
func MustRequirement(key string, op corev1.NodeSelectorOperator, values ...string) *Requirement {
	r, err := NewRequirement(key, op, values...)
	if err != nil {
		panic(err)
	}
	return r
}

func setOf(values []string) map[string]struct{} {
	m := make(map[string]struct{}, len(values))
	for _, v := range values {
		m[v] = struct{}{}
	}
	return m
}

func (r *Requirement) inBounds(v string) bool {
	if r.greaterThan == nil && r.lessThan == nil {
		return true
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return false
	}
	return (r.greaterThan == nil || n > *r.greaterThan) && (r.lessThan == nil || n < *r.lessThan)
}

// Has reports whether value is in the set.
func (r *Requirement) Has(value string) bool {
	_, listed := r.values[value]
	if r.complement {
		return !listed && r.inBounds(value)
	}
	return listed && r.inBounds(value)
}

// Empty reports whether no value satisfies the set (DoesNotExist on a node).
func (r *Requirement) Empty() bool {
	if !r.complement {
		for v := range r.values {
			if r.inBounds(v) {
				return false
			}
		}
		return true
	}
	if r.greaterThan != nil && r.lessThan != nil {
		lo, hi := *r.greaterThan+1, *r.lessThan-1
		if hi < lo {
			return true
		}
		excluded := 0
		for v := range r.values {
			if n, err := strconv.Atoi(v); err == nil && n >= lo && n <= hi {
				excluded++
			}
		}
		return hi-lo+1 <= excluded
	}
	return false
}

// Len is the number of values in the set, MaxInt for an unbounded complement.
func (r *Requirement) Len() int {
	if r.complement {
		return math.MaxInt
	}
	n := 0
	for v := range r.values {
		if r.inBounds(v) {
			n++
		}
	}
	return n
}

// Values returns the set's values in order (nil for a complement).
func (r *Requirement) Values() []string {
	if r.complement {
		return nil
	}
	out := make([]string, 0, len(r.values))
	for v := range r.values {
		if r.inBounds(v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// Any returns some value in the set, preferring the smallest, for labels that
// a node must carry but no one chose.
func (r *Requirement) Any() (string, bool) {
	if !r.complement {
		vs := r.Values()
		if len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}
	start := 0
	if r.greaterThan != nil {
		start = *r.greaterThan + 1
	}
	for n := start; r.lessThan == nil || n < *r.lessThan; n++ {
		if v := strconv.Itoa(n); r.Has(v) {
			return v, true
		}
		if n-start > 1<<16 {
			break
		}
	}
	return "", false
}

// Intersect returns the values in both sets.
func (r *Requirement) Intersect(o *Requirement) *Requirement {
	out := &Requirement{Key: r.Key, absentOK: r.absentOK && o.absentOK, MinValues: maxPtr(r.MinValues, o.MinValues)}
	out.greaterThan = maxPtr(r.greaterThan, o.greaterThan)
	out.lessThan = minPtr(r.lessThan, o.lessThan)
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = make(map[string]struct{}, len(r.values)+len(o.values))
		for v := range r.values {
			out.values[v] = struct{}{}
		}
		for v := range o.values {
			out.values[v] = struct{}{}
		}
	case r.complement:
		out.values = make(map[string]struct{}, len(o.values))
		for v := range o.values {
			if r.Has(v) {
				out.values[v] = struct{}{}
			}
		}
	case o.complement:
		out.values = make(map[string]struct{}, len(r.values))
		for v := range r.values {
			if o.Has(v) {
				out.values[v] = struct{}{}
			}
		}
	default:
		small, big := r.values, o.values
		if len(small) > len(big) {
			small, big = big, small
		}
		out.values = make(map[string]struct{}, len(small))
		for v := range small {
			if _, ok := big[v]; ok {
				out.values[v] = struct{}{}
			}
		}
	}
	return out
}

// Intersects reports whether some value satisfies both r and o, as
// !r.Intersect(o).Empty() does, without building the intersection: a
// placement asks it of every node it scans.
func (r *Requirement) Intersects(o *Requirement) bool {
	if r.complement && o.complement {
		return !r.Intersect(o).Empty()
	}
	// Walk the finite set, the smaller when both are.
	if r.complement || (!o.complement && len(o.values) < len(r.values)) {
		r, o = o, r
	}
	for v := range r.values {
		if r.inBounds(v) && o.Has(v) {
			return true
		}
	}
	return false
}

// NodeSelectorRequirement converts back to the API form.
func (r *Requirement) NodeSelectorRequirement() v1.NodeSelectorRequirementWithMinValues {
	out := v1.NodeSelectorRequirementWithMinValues{Key: r.Key, MinValues: r.MinValues}
	switch {
	case !r.complement && len(r.values) == 0:
		out.Operator = corev1.NodeSelectorOpDoesNotExist
	case !r.complement:
		out.Operator, out.Values = corev1.NodeSelectorOpIn, r.Values()
	case len(r.values) > 0:
		out.Operator = corev1.NodeSelectorOpNotIn
		out.Values = make([]string, 0, len(r.values))
		for v := range r.values {
			out.Values = append(out.Values, v)
		}
		sort.Strings(out.Values)
	case r.greaterThan != nil:
		out.Operator, out.Values = corev1.NodeSelectorOpGt, []string{strconv.Itoa(*r.greaterThan)}
	case r.lessThan != nil:
		out.Operator, out.Values = corev1.NodeSelectorOpLt, []string{strconv.Itoa(*r.lessThan)}
	default:
		out.Operator = corev1.NodeSelectorOpExists
	}
	return out
}

func (r *Requirement) String() string {
	nsr := r.NodeSelectorRequirement()
	if len(nsr.Values) == 0 {
		return fmt.Sprintf("%s %s", r.Key, nsr.Operator)
	}
	return fmt.Sprintf("%s %s [%s]", r.Key, nsr.Operator, strings.Join(nsr.Values, ","))
}

func maxPtr(a, b *int) *int {
	switch {
	case a == nil:
		return b
	case b == nil || *a >= *b:
		return a
	default:
		return b
	}
}

func minPtr(a, b *int) *int {
	switch {
	case a == nil:
		return b
	case b == nil || *a <= *b:
		return a
	default:
		return b
	}
}

// Requirements are requirements keyed by label.
type Requirements map[string]*Requirement

// NewRequirements builds requirements, intersecting repeated keys.
func NewRequirements(rs ...*Requirement) Requirements {
	out := Requirements{}
	for _, r := range rs {
		out.Add(r)
	}
	return out
}

// LabelRequirements turns concrete labels into single-value requirements.
func LabelRequirements(labels map[string]string) Requirements {
	out := make(Requirements, len(labels))
	for k, v := range labels {
		out[k] = label(k, v)
	}
	return out
}

func label(key, value string) *Requirement {
	return &Requirement{Key: key, values: map[string]struct{}{value: {}}}
}

// Interner hands out LabelRequirements whose requirements are shared with
// every earlier set it made that had the same label. Instance types repeat
// their labels: in one region the catalog's 1,345 types carry 23,611 labels,
// about 2,000 of them distinct, and their requirements, a map each, held
// 8.9 MB of live heap (12 MB in the scale run); shared, 2.2 MB. Sharing is
// safe because a set's requirements are never changed in place (Add
// replaces them). Use it only for labels drawn from a bounded set, such as
// instance types': it keeps every label it has seen. The zero value is
// ready.
type Interner struct {
	mu sync.Mutex
	m  map[[2]string]*Requirement
}

// LabelRequirements is the package's LabelRequirements with shared requirements.
func (in *Interner) LabelRequirements(labels map[string]string) Requirements {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.m == nil {
		in.m = map[[2]string]*Requirement{}
	}
	out := make(Requirements, len(labels))
	for k, v := range labels {
		key := [2]string{k, v}
		r, ok := in.m[key]
		if !ok {
			r = label(k, v)
			in.m[key] = r
		}
		out[k] = r
	}
	return out
}

// FromNodeSelectorRequirements converts API requirements, normalizing
// deprecated label keys as the kubelet does.
func FromNodeSelectorRequirements(in ...v1.NodeSelectorRequirementWithMinValues) (Requirements, error) {
	out := Requirements{}
	for _, nsr := range in {
		r, err := NewRequirement(NormalizeKey(nsr.Key), nsr.Operator, nsr.Values...)
		if err != nil {
			return nil, err
		}
		r.MinValues = nsr.MinValues
		out.Add(r)
	}
	return out, nil
}

// Add intersects r into the set.
func (rs Requirements) Add(r *Requirement) {
	if existing, ok := rs[r.Key]; ok {
		rs[r.Key] = existing.Intersect(r)
		return
	}
	rs[r.Key] = r
}

// Copy returns a shallow copy; Requirement values are never mutated in place.
func (rs Requirements) Copy() Requirements {
	out := make(Requirements, len(rs))
	for k, v := range rs {
		out[k] = v
	}
	return out
}

// Merge returns rs intersected with others.
func (rs Requirements) Merge(others Requirements) Requirements {
	out := rs.Copy()
	for _, r := range others {
		out.Add(r)
	}
	return out
}

// Allows reports whether a label with this value satisfies every
// requirement on key; a key nobody constrained allows anything. The cloud
// providers ask it of concrete offerings: a zone, a capacity type.
func (rs Requirements) Allows(key, value string) bool {
	r, ok := rs[key]
	return !ok || r.Has(value)
}

// Compatible reports why a node whose labels can take the values in rs
// cannot satisfy the pod predicates in pod, or nil when it can.
func (rs Requirements) Compatible(pod Requirements) error {
	for k, p := range pod {
		if err := rs.compatibleKey(k, p); err != nil {
			return err
		}
	}
	return nil
}

func (rs Requirements) compatibleKey(k string, p *Requirement) error {
	n, ok := rs[k]
	if !ok || n.Empty() {
		if p.absentOK {
			return nil
		}
		return labelNotOffered(k, p)
	}
	if !n.Intersects(p) {
		return incompatible(p, n)
	}
	return nil
}

// LabelsCompatible is LabelRequirements(labels).Compatible(pod) without
// building the requirements: an existing node's labels are checked this
// way against every pod that might go there, and requirements for the
// labels of 1,700 nodes took 24 MB in the two plans a scale run held.
func LabelsCompatible(labels map[string]string, pod Requirements) error {
	for k, p := range pod {
		v, ok := labels[k]
		if !ok {
			if p.absentOK {
				continue
			}
			return labelNotOffered(k, p)
		}
		if !p.Has(v) {
			return labelMismatchError{p: p, key: k, value: v}
		}
	}
	return nil
}

// NotOffered is the error of a predicate p on label k that no value
// offered satisfies because the label is absent.
func NotOffered(k string, p *Requirement) error { return labelNotOffered(k, p) }

// Incompatible is the error of a predicate p that the offered values miss.
func Incompatible(p, offered *Requirement) error { return incompatible(p, offered) }

// The errors keep their parts and write the message only when asked: a
// placement tries many nodes that refuse a pod and reads none of the
// reasons, and writing them was most of what it allocated.

type notOfferedError struct {
	key string
	p   *Requirement
}

func (e notOfferedError) Error() string {
	return fmt.Sprintf("label %q is not offered (requires %s)", e.key, e.p)
}

type incompatibleError struct{ p, offered *Requirement }

func (e incompatibleError) Error() string {
	return fmt.Sprintf("incompatible requirement %s, offered %s", e.p, e.offered)
}

// labelMismatchError is incompatibleError for a concrete label.
type labelMismatchError struct {
	p          *Requirement
	key, value string
}

func (e labelMismatchError) Error() string {
	return incompatibleError{p: e.p, offered: In(e.key, e.value)}.Error()
}

func labelNotOffered(k string, p *Requirement) error { return notOfferedError{key: k, p: p} }

func incompatible(p, offered *Requirement) error { return incompatibleError{p: p, offered: offered} }

// String lists the requirements sorted by key, for messages that tell a
// user what was asked for.
func (rs Requirements) String() string {
	if len(rs) == 0 {
		return "no requirements"
	}
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = rs[k].String()
	}
	return strings.Join(parts, ", ")
}

// Labels picks one value for every key with a value, for node labels.
func (rs Requirements) Labels() map[string]string {
	out := map[string]string{}
	for k, r := range rs {
		if v, ok := r.Any(); ok {
			out[k] = v
		}
	}
	return out
}

// NodeSelectorRequirements converts to the API form, sorted by key.
func (rs Requirements) NodeSelectorRequirements() []v1.NodeSelectorRequirementWithMinValues {
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]v1.NodeSelectorRequirementWithMinValues, 0, len(keys))
	for _, k := range keys {
		out = append(out, rs[k].NodeSelectorRequirement())
	}
	return out
}

var normalizedKeys = map[string]string{
	"failure-domain.beta.kubernetes.io/zone":   corev1.LabelTopologyZone,
	"failure-domain.beta.kubernetes.io/region": corev1.LabelTopologyRegion,
	"beta.kubernetes.io/arch":                  corev1.LabelArchStable,
	"beta.kubernetes.io/os":                    corev1.LabelOSStable,
	"beta.kubernetes.io/instance-type":         corev1.LabelInstanceTypeStable,
}

// NormalizeKey maps deprecated well-known label keys to their current names.
func NormalizeKey(k string) string {
	if n, ok := normalizedKeys[k]; ok {
		return n
	}
	return k
}
