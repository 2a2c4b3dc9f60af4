package pods

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WithLimitRanges is the pod as the API server would admit it in its
// namespace: each container gets the default requests and limits of the
// namespace's LimitRanges (type Container) for the resources it does not
// set, as the LimitRanger admission plugin gives them. A DaemonSet's
// template has not been admitted, so its pods' requests, which every new
// node must make room for, are only known this way before one exists: a
// LimitRange defaulting each container to 2 CPUs made nodes without room
// for the DaemonSet, for ever, when its template was read as asking
// nothing. The pod is returned as it is when no range adds anything.
func WithLimitRanges(pod *corev1.Pod, ranges []corev1.LimitRange) *corev1.Pod {
	var items []corev1.LimitRangeItem
	for i := range ranges {
		if ranges[i].Namespace != pod.Namespace {
			continue
		}
		for _, it := range ranges[i].Spec.Limits {
			if it.Type == corev1.LimitTypeContainer && (len(it.Default) > 0 || len(it.DefaultRequest) > 0) {
				items = append(items, it)
			}
		}
	}
	if len(items) == 0 {
		return pod
	}
	out := pod.DeepCopy()
	for _, cs := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			res := &cs[i].Resources
			for _, it := range items {
				res.Limits = fill(res.Limits, it.Default)
				res.Requests = fill(res.Requests, it.DefaultRequest)
			}
		}
	}
	return out
}

// Template is a pod template as the API server would admit its pods in
// namespace: DefaultRequests, then the LimitRanges' defaults
// (WithLimitRanges), in the order the API server applies them.
func Template(tmpl corev1.PodTemplateSpec, namespace string, ranges []corev1.LimitRange) corev1.PodTemplateSpec {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace}, Spec: *tmpl.Spec.DeepCopy()}
	DefaultRequests(&p.Spec)
	out := *tmpl.DeepCopy()
	out.Spec = WithLimitRanges(p, ranges).Spec
	return out
}

// DefaultRequests gives each container of spec, in place, its limits as
// requests for the resources it requests nothing of, as the API server
// defaults every pod it admits. A template (a DaemonSet's, a Deployment's,
// a buffer's PodTemplate) is not defaulted so, and its pods would otherwise
// be read as asking nothing: a DaemonSet of containers with only memory
// limits took no room in the plan, its pods found no room on the node
// launched for them, and the node's other pods got a second node.
func DefaultRequests(spec *corev1.PodSpec) {
	if r := spec.Resources; r != nil && len(r.Limits) > 0 {
		r.Requests = fill(r.Requests, r.Limits) // pod-level resources, likewise
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			if len(cs[i].Resources.Limits) > 0 {
				cs[i].Resources.Requests = fill(cs[i].Resources.Requests, cs[i].Resources.Limits)
			}
		}
	}
}

// fill adds the defaults a list lacks.
func fill(have, defaults corev1.ResourceList) corev1.ResourceList {
	for name, q := range defaults {
		if _, ok := have[name]; ok {
			continue
		}
		if have == nil {
			have = corev1.ResourceList{}
		}
		have[name] = q.DeepCopy()
	}
	return have
}
