package requirements

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
)

// deprecatedKeys maps the beta label keys that old manifests still use to the
// keys our nodes carry, so a NodeClaim written against either selects the same
// machines, as the kubelet's own label normalization would.
var deprecatedKeys = map[string]string{
	"failure-domain.beta.kubernetes.io/zone":   corev1.LabelTopologyZone,
	"failure-domain.beta.kubernetes.io/region": corev1.LabelTopologyRegion,
	"beta.kubernetes.io/arch":                  corev1.LabelArchStable,
	"beta.kubernetes.io/os":                    corev1.LabelOSStable,
	"beta.kubernetes.io/instance-type":         corev1.LabelInstanceTypeStable,
}

// requirement is one NodeClaim requirement evaluated against a concrete label
// value. The cloud only ever asks "does this machine's label satisfy it", never
// set algebra, so this stays much smaller than the scheduler's Requirements
// and does not tie the fake cloud to the scheduler's internals.
type requirement struct {
	key    string
	op     corev1.NodeSelectorOperator
	values map[string]struct{}
	bound  int // the integer of Gt, Lt, Gte and Lte
	raw    []string
}

// Requirements are all of a NodeClaim's Requirements; a key may repeat and
// then every entry must hold, as in a node selector term.
type Requirements map[string][]requirement

func Parse(in []v1.NodeSelectorRequirementWithMinValues) (Requirements, error) {
	out := Requirements{}
	for _, r := range in {
		key := r.Key
		if k, ok := deprecatedKeys[key]; ok {
			key = k
		}
		req := requirement{key: key, op: r.Operator, raw: r.Values}
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			req.values = make(map[string]struct{}, len(r.Values))
			for _, v := range r.Values {
				req.values[v] = struct{}{}
			}
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
			if len(r.Values) != 1 {
				return nil, fmt.Errorf("requirement %s %s needs exactly one integer value, got %d", r.Key, r.Operator, len(r.Values))
			}
			n, err := strconv.Atoi(r.Values[0])
			if err != nil {
				return nil, fmt.Errorf("requirement %s %s needs an integer value, got %q", r.Key, r.Operator, r.Values[0])
			}
			req.bound = n
		default:
			return nil, fmt.Errorf("requirement %s has unknown operator %q", r.Key, r.Operator)
		}
		out[key] = append(out[key], req)
	}
	return out, nil
}

// accepts reports whether a label with the given value (present=false: no such
// label) satisfies the requirement, with Kubernetes node-affinity semantics:
// NotIn and DoesNotExist accept a missing label, everything else needs it.
func (r requirement) accepts(value string, present bool) bool {
	if !present {
		return r.op == corev1.NodeSelectorOpNotIn || r.op == corev1.NodeSelectorOpDoesNotExist
	}
	switch r.op {
	case corev1.NodeSelectorOpIn:
		_, ok := r.values[value]
		return ok
	case corev1.NodeSelectorOpNotIn:
		_, ok := r.values[value]
		return !ok
	case corev1.NodeSelectorOpExists:
		return true
	case corev1.NodeSelectorOpDoesNotExist:
		return false
	}
	n, err := strconv.Atoi(value)
	if err != nil {
		return false
	}
	switch r.op {
	case corev1.NodeSelectorOpGt:
		return n > r.bound
	case corev1.NodeSelectorOpLt:
		return n < r.bound
	case v1.NodeSelectorOpGte:
		return n >= r.bound
	case v1.NodeSelectorOpLte:
		return n <= r.bound
	}
	return false
}

// allow reports whether every requirement on key accepts value; a key nobody
// constrained allows anything.
func (rs Requirements) Allow(key, value string) bool {
	for _, r := range rs[key] {
		if !r.accepts(value, true) {
			return false
		}
	}
	return true
}

// String lists the Requirements sorted by key, for error messages that tell a
// user what was asked for.
func (rs Requirements) String() string {
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		for _, r := range rs[k] {
			if len(r.raw) == 0 {
				parts = append(parts, fmt.Sprintf("%s %s", k, r.op))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s [%s]", k, r.op, strings.Join(r.raw, ",")))
		}
	}
	if len(parts) == 0 {
		return "no requirements"
	}
	return strings.Join(parts, ", ")
}

// TypeAllowed checks the requirements that depend on the instance type alone.
// Zone and capacity type vary per offering and are checked there. A key the
// type has no label for is not the cloud's to judge: such labels come from the
// NodePool template and the NodeClaim carries them onto the Node itself.
func (reqs Requirements) TypeAllowed(it *cloudprovider.InstanceType) bool {
	for key := range reqs {
		switch key {
		case corev1.LabelTopologyZone, v1.LabelCapacityType:
			continue
		case corev1.LabelInstanceTypeStable:
			if !reqs.Allow(key, it.Name) {
				return false
			}
			continue
		}
		if v, ok := it.Labels[key]; ok && !reqs.Allow(key, v) {
			return false
		}
	}
	return true
}

// Fits reports whether requests fit in allocatable. A resource the type does
// not have at all (a GPU on a CPU type) does not fit any non-zero request.
func Fits(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		if q.Sign() <= 0 {
			continue
		}
		a, ok := allocatable[name]
		if !ok || q.Cmp(a) > 0 {
			return false
		}
	}
	return true
}

func ResourceString(rl corev1.ResourceList) string {
	if len(rl) == 0 {
		return "none"
	}
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		q := rl[corev1.ResourceName(n)]
		parts[i] = n + "=" + q.String()
	}
	return strings.Join(parts, ",")
}
