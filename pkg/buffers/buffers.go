// Package buffers turns CapacityBuffers (autoscaling.x-k8s.io/v1beta1, the
// CapacityBuffer gate) into virtual pods: pods that exist only in plans.
// The provisioner plans them with the pending pods, so nodes are kept with
// room for them; real pods take that room when they come, and the next
// plan launches more for the virtual ones, so the buffer refills. Plans of
// consolidation count them as pending pods too, so no node whose room they
// hold is taken away, and drift and expiry replace such nodes as any
// other. They are never bound, nominated or told about in events.
package buffers

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/joiner-autoscaler/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations of a virtual pod, as Karpenter names them.
const (
	AnnotationVirtual   = "karpenter.sh/capacity-buffer-fake-pod"
	AnnotationName      = "karpenter.sh/capacity-buffer-name"
	AnnotationNamespace = "karpenter.sh/capacity-buffer-namespace"
)

// IsVirtual reports a buffer's virtual pod.
func IsVirtual(p *corev1.Pod) bool { return p.Annotations[AnnotationVirtual] == "true" }

// Owner is the buffer of a virtual pod, namespace/name.
func Owner(p *corev1.Pod) string {
	return p.Annotations[AnnotationNamespace] + "/" + p.Annotations[AnnotationName]
}

// Count is how many pods the buffer keeps room for. With a scalable
// workload, percentage is a share of its replicas, rounded up and at least
// one; with replicas too, the larger of the two counts, as Karpenter
// v1.14.1 takes it. Limits cut the count to what fits in them, and alone
// make it, by the pod's requests of each limited resource.
func Count(spec v1beta1.CapacityBufferSpec, pod corev1.PodSpec, workloadReplicas *int32) int32 {
	var candidates []int32
	if spec.ScalableRef != nil && spec.Percentage != nil && workloadReplicas != nil && *workloadReplicas > 0 && *spec.Percentage > 0 {
		n := int32(math.Ceil(float64(*workloadReplicas) * float64(*spec.Percentage) / 100))
		candidates = append(candidates, max(n, 1))
	}
	if spec.Replicas != nil {
		candidates = append(candidates, *spec.Replicas)
	}
	desired, sized := int32(0), len(candidates) > 0
	for _, c := range candidates {
		desired = max(desired, c)
	}
	if fit, ok := fitsLimits(spec.Limits, pod); ok {
		if !sized {
			return fit
		}
		return min(desired, fit)
	}
	return desired
}

// fitsLimits is how many pods fit in limits, counting each resource both
// limit and pod name; false when no such resource.
func fitsLimits(limits corev1.ResourceList, pod corev1.PodSpec) (int32, bool) {
	spec := pod.DeepCopy()
	pods.DefaultRequests(spec)
	requests := resources.PodRequests(&corev1.Pod{Spec: *spec})
	best, found := int64(math.MaxInt32), false
	for name, q := range limits {
		per := requests.Of(name)
		if per <= 0 {
			continue
		}
		found = true
		best = min(best, resources.Units(name, q)/per)
	}
	return int32(best), found
}

// Pods are the buffer's n virtual pods, of the template: its labels (so
// spread and affinity count them), its spec without a node or volumes that
// claim storage (no disk is made for a pod that never runs), the lowest
// priority, and the Unschedulable condition of a pod waiting for capacity.
func Pods(b *v1beta1.CapacityBuffer, tmpl corev1.PodTemplateSpec, n int32, now time.Time) []*corev1.Pod {
	spec := tmpl.Spec.DeepCopy()
	pods.DefaultRequests(spec)
	spec.NodeName = ""
	claimed := map[string]bool{}
	var vols []corev1.Volume
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			claimed[v.Name] = true
			continue
		}
		vols = append(vols, v)
	}
	spec.Volumes = vols
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			var mounts []corev1.VolumeMount
			for _, m := range cs[i].VolumeMounts {
				if !claimed[m.Name] {
					mounts = append(mounts, m)
				}
			}
			cs[i].VolumeMounts = mounts
		}
	}
	lowest := int32(math.MinInt32)
	spec.Priority = &lowest
	out := make([]*corev1.Pod, n)
	for i := range n {
		labels := map[string]string{}
		for k, v := range tmpl.Labels {
			labels[k] = v
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("capacity-buffer-%s-%d", b.Name, i+1), Namespace: b.Namespace,
				UID:    types.UID(string(b.UID) + "-" + strconv.Itoa(int(i+1))),
				Labels: labels, CreationTimestamp: metav1.NewTime(now),
				Annotations: map[string]string{AnnotationVirtual: "true", AnnotationName: b.Name, AnnotationNamespace: b.Namespace},
			},
			Spec: *spec.DeepCopy(),
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable},
			}},
		}
		out[i] = p
	}
	return out
}

// Store holds the virtual pods of every resolved buffer, for the plans.
type Store struct {
	mu   sync.RWMutex
	pods map[string][]*corev1.Pod
}

// Set keeps a buffer's pods (namespace/name); none removes it. It reports
// whether anything changed.
func (s *Store) Set(key string, pods []*corev1.Pod) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pods == nil {
		s.pods = map[string][]*corev1.Pod{}
	}
	old, had := s.pods[key]
	if len(pods) == 0 {
		delete(s.pods, key)
		return had
	}
	s.pods[key] = pods
	return !had || len(old) != len(pods) || !sameSpec(old[0], pods[0])
}

func sameSpec(a, b *corev1.Pod) bool {
	return a.Spec.String() == b.Spec.String() && fmt.Sprint(a.Labels) == fmt.Sprint(b.Labels)
}

// All are every buffer's virtual pods, in a stable order. They are
// shared: callers read them and never change them.
func (s *Store) All() []*corev1.Pod {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := make([]string, 0, len(s.pods))
	for k := range s.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*corev1.Pod
	for _, k := range keys {
		out = append(out, s.pods[k]...)
	}
	return out
}
