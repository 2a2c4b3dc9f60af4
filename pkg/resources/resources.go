// Package resources is the resource vector the planner adds and compares
// millions of times per plan: millicores, bytes and counts in integers,
// with extended resources beside them.
package resources

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources is a resource vector in integer units: millicores, bytes and
// counts. The scheduler adds and compares these millions of times per plan,
// so the common resources are plain fields rather than a ResourceList.
type Resources struct {
	CPU, Memory, Pods, Ephemeral int64
	// Ext holds extended resources such as nvidia.com/gpu; nil when none.
	Ext map[corev1.ResourceName]int64
}

// FromResourceList converts a ResourceList.
func FromResourceList(rl corev1.ResourceList) Resources {
	var r Resources
	r.AddList(rl)
	return r
}

// PodRequests returns what a pod asks of a node, including init and sidecar
// containers and pod overhead, plus one pod slot.
//
// Most pods have neither init containers nor pod-level requests, and for
// them the sum of the containers' requests and the overhead is read here
// directly: the general helper builds a ResourceList per container, which
// made it a fifth of a consolidation decision's time at 1,000 nodes.
func PodRequests(pod *corev1.Pod) Resources {
	var r Resources
	if len(pod.Spec.InitContainers) == 0 && pod.Spec.Resources == nil {
		for i := range pod.Spec.Containers {
			r.AddList(pod.Spec.Containers[i].Resources.Requests)
		}
		r.AddList(pod.Spec.Overhead)
	} else {
		r = FromResourceList(pods.Requests(pod))
	}
	r.Pods = 1
	return r
}

// AddList adds rl to r in place: a sum over many lists allocates nothing
// but r's own map of extended resources, where Add would copy that map at
// every step.
func (r *Resources) AddList(rl corev1.ResourceList) {
	owned := false
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.CPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourcePods:
			r.Pods += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.Ephemeral += q.Value()
		default:
			if q.IsZero() {
				continue
			}
			// r's map may be another value's too (Add shares them): it
			// is copied before the first write, never written.
			if !owned {
				r.Ext, owned = maps.Clone(r.Ext), true
				if r.Ext == nil {
					r.Ext = map[corev1.ResourceName]int64{}
				}
			}
			r.Ext[name] += q.Value()
		}
	}
}

// With returns r with the extended resource name set to v; r's map of
// extended resources is copied, never written.
func (r Resources) With(name corev1.ResourceName, v int64) Resources {
	ext := make(map[corev1.ResourceName]int64, len(r.Ext)+1)
	for k, q := range r.Ext {
		ext[k] = q
	}
	ext[name] = v
	r.Ext = ext
	return r
}

// Add returns r + o.
//
// A map of extended resources is never written once made, so a sum with
// nothing to add to it shares it: nearly every instance type has
// vpc.amazonaws.com/pod-eni, and copying it on every sum of a node's room
// and a pod's requests cost an eighth of joiner simulate's time at a
// 2,000-pod noon (30 minutes of it in 25 s rather than 29 s, the mean of
// four runs each, the same decisions).
func (r Resources) Add(o Resources) Resources {
	out := Resources{CPU: r.CPU + o.CPU, Memory: r.Memory + o.Memory, Pods: r.Pods + o.Pods, Ephemeral: r.Ephemeral + o.Ephemeral}
	switch {
	case o.Ext == nil:
		out.Ext = r.Ext
	case r.Ext == nil:
		out.Ext = o.Ext
	default:
		out.Ext = make(map[corev1.ResourceName]int64, len(r.Ext)+len(o.Ext))
		for k, v := range r.Ext {
			out.Ext[k] += v
		}
		for k, v := range o.Ext {
			out.Ext[k] += v
		}
	}
	return out
}

// Sub returns r - o, sharing r's map of extended resources when o has
// none (see Add).
func (r Resources) Sub(o Resources) Resources {
	if o.Ext == nil {
		return Resources{CPU: r.CPU - o.CPU, Memory: r.Memory - o.Memory, Pods: r.Pods - o.Pods, Ephemeral: r.Ephemeral - o.Ephemeral, Ext: r.Ext}
	}
	neg := Resources{CPU: -o.CPU, Memory: -o.Memory, Pods: -o.Pods, Ephemeral: -o.Ephemeral}
	if o.Ext != nil {
		neg.Ext = make(map[corev1.ResourceName]int64, len(o.Ext))
		for k, v := range o.Ext {
			neg.Ext[k] = -v
		}
	}
	return r.Add(neg)
}

// Scale returns r × n.
func (r Resources) Scale(n int64) Resources {
	out := Resources{CPU: r.CPU * n, Memory: r.Memory * n, Pods: r.Pods * n, Ephemeral: r.Ephemeral * n}
	if r.Ext != nil {
		out.Ext = make(map[corev1.ResourceName]int64, len(r.Ext))
		for k, v := range r.Ext {
			out.Ext[k] = v * n
		}
	}
	return out
}

// Fits reports whether r fits in capacity.
func (r Resources) Fits(capacity Resources) bool {
	if r.CPU > capacity.CPU || r.Memory > capacity.Memory || r.Pods > capacity.Pods || r.Ephemeral > capacity.Ephemeral {
		return false
	}
	for k, v := range r.Ext {
		if v > 0 && v > capacity.Ext[k] {
			return false
		}
	}
	return true
}

// MaxCopies is how many copies of r fit in capacity (at most limit).
func (r Resources) MaxCopies(capacity Resources, limit int64) int64 {
	n := limit
	div := func(need, have int64) {
		if need > 0 {
			if c := have / need; c < n {
				n = c
			}
		}
	}
	div(r.CPU, capacity.CPU)
	div(r.Memory, capacity.Memory)
	div(r.Pods, capacity.Pods)
	div(r.Ephemeral, capacity.Ephemeral)
	for k, v := range r.Ext {
		div(v, capacity.Ext[k])
	}
	if n < 0 {
		return 0
	}
	return n
}

// Fraction is the largest share of capacity that r uses on any resource:
// how much of a node r really occupies.
func (r Resources) Fraction(capacity Resources) float64 {
	f := 0.0
	frac := func(need, have int64) {
		if need <= 0 {
			return
		}
		if have <= 0 {
			f = 1e18
			return
		}
		if x := float64(need) / float64(have); x > f {
			f = x
		}
	}
	frac(r.CPU, capacity.CPU)
	frac(r.Memory, capacity.Memory)
	frac(r.Pods, capacity.Pods)
	frac(r.Ephemeral, capacity.Ephemeral)
	for k, v := range r.Ext {
		frac(v, capacity.Ext[k])
	}
	return f
}

// Of is the amount of name in r, in r's units: millicores for cpu, bytes
// or counts for the rest. It reads one resource without building a
// ResourceList, which the NodePool limit checks did once per node opened
// and then allocated a quarter of the controller's memory churn at 10,000
// pods (docs/benchmarks.md §7).
func (r Resources) Of(name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.CPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourcePods:
		return r.Pods
	case corev1.ResourceEphemeralStorage:
		return r.Ephemeral
	}
	return r.Ext[name]
}

// Units is q in the units Resources keeps name in, rounded up.
func Units(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// ResourceList converts back, leaving out zero values.
func (r Resources) ResourceList() corev1.ResourceList {
	rl := corev1.ResourceList{}
	if r.CPU != 0 {
		rl[corev1.ResourceCPU] = *resource.NewMilliQuantity(r.CPU, resource.DecimalSI)
	}
	if r.Memory != 0 {
		rl[corev1.ResourceMemory] = *resource.NewQuantity(r.Memory, resource.BinarySI)
	}
	if r.Pods != 0 {
		rl[corev1.ResourcePods] = *resource.NewQuantity(r.Pods, resource.DecimalSI)
	}
	if r.Ephemeral != 0 {
		rl[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(r.Ephemeral, resource.BinarySI)
	}
	for k, v := range r.Ext {
		if v != 0 {
			rl[k] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return rl
}

// ListString formats a ResourceList for messages, like cpu=500m,memory=512Mi,
// keys sorted; "none" when it is empty.
func ListString(rl corev1.ResourceList) string {
	if len(rl) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(rl))
	for k := range rl {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := rl[corev1.ResourceName(k)]
		parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
	}
	return strings.Join(parts, ",")
}

// String formats like {"cpu":"500m","memory":"512Mi"}, keys sorted.
func (r Resources) String() string {
	rl := r.ResourceList()
	keys := make([]string, 0, len(rl))
	for k := range rl {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := rl[corev1.ResourceName(k)]
		parts = append(parts, fmt.Sprintf("%q:%q", k, q.String()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// NonNegative returns r with every negative quantity raised to zero.
func (r Resources) NonNegative() Resources {
	out := Resources{CPU: max(r.CPU, 0), Memory: max(r.Memory, 0), Pods: max(r.Pods, 0), Ephemeral: max(r.Ephemeral, 0)}
	for k, v := range r.Ext {
		if v > 0 {
			if out.Ext == nil {
				out.Ext = map[corev1.ResourceName]int64{}
			}
			out.Ext[k] = v
		}
	}
	return out
}
