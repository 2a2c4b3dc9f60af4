// Package pods holds the facts about a pod that several controllers need to
// agree on: whether it belongs to its node, which host ports it takes, what
// it requests, and whether it waits for capacity. Each question has one
// answer here, so that the provisioner, consolidation and the drain never
// disagree about the same pod.
package pods

import (
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"
)

// IsOwnedByDaemonSet reports a pod a DaemonSet runs. Such a pod is recreated
// on the same node if evicted, so draining it achieves nothing, and moving
// its node's other pods never moves it.
func IsOwnedByDaemonSet(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" && (o.APIVersion == "" || o.APIVersion == appsv1.SchemeGroupVersion.String()) {
			return true
		}
	}
	return false
}

// IsMirror reports a static pod's mirror: the kubelet owns it, and the API
// server cannot evict it.
func IsMirror(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// IsOwnedByNode reports a pod that lives and dies with its node (a
// DaemonSet or mirror pod): it never moves elsewhere, is never evicted, and
// does not make a node non-empty.
func IsOwnedByNode(pod *corev1.Pod) bool {
	return IsOwnedByDaemonSet(pod) || IsMirror(pod)
}

// IsTerminal reports a pod that no longer uses its node's resources.
func IsTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// IsProvisionable reports whether a pod is waiting for capacity: the
// scheduler found no node for it, it is not bound, not preempting its way in,
// not a DaemonSet or mirror pod, and not finished or going away.
func IsProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Status.NominatedNodeName != "" {
		return false
	}
	if IsTerminal(pod) || IsOwnedByNode(pod) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// HasResourceClaims reports a pod that asks for Dynamic Resource
// Allocation devices: claims of the pod, or of any container. Joiner does
// not model devices, so it neither launches nodes for such a pod nor counts
// such a DaemonSet's pods on a new node, as Karpenter with its default
// IGNORE_DRA_REQUESTS=true does not.
func HasResourceClaims(pod *corev1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if len(cs[i].Resources.Claims) > 0 {
				return true
			}
		}
	}
	return false
}

// ToleratesDisrupted reports a pod that tolerates Karpenter's disrupted
// taint: it asked to stay on a node being drained, so a drain neither
// evicts it nor waits for it, and it needs no other node.
func ToleratesDisrupted(pod *corev1.Pod) bool {
	for _, t := range pod.Spec.Tolerations {
		if t.ToleratesTaint(quiet, &v1.DisruptedNoScheduleTaint, false) {
			return true
		}
	}
	return false
}

// quiet is the logger ToleratesTaint asks for, which says nothing.
var quiet = klog.Background().V(100)

// IsCritical reports a pod of the two system priority classes. The drain
// evicts these last, so that DNS, CNI helpers and the like keep serving the
// node's other pods until those are gone.
func IsCritical(pod *corev1.Pod) bool {
	switch pod.Spec.PriorityClassName {
	case "system-cluster-critical", "system-node-critical":
		return true
	}
	return false
}

// DoNotDisrupt reports whether the pod's karpenter.sh/do-not-disrupt
// annotation protects it at now. "true" protects it for good; a duration
// ("30m", Karpenter v1.12 and later) protects it for that long after the
// pod started, and from the moment it is bound until it starts, since its
// clock has not begun. Any other value protects nothing, as in Karpenter,
// which reads the annotation the same way.
func DoNotDisrupt(pod *corev1.Pod, now time.Time) bool {
	value, ok := pod.Annotations[v1.AnnotationDoNotDisrupt]
	if !ok {
		return false
	}
	if value == "true" {
		return true
	}
	d, err := time.ParseDuration(value)
	if err != nil || d <= 0 {
		return false
	}
	if pod.Status.StartTime == nil {
		return true
	}
	return now.Before(pod.Status.StartTime.Add(d))
}

// Requests is what a pod asks of a node: containers, init and sidecar
// containers, pod-level resources and overhead, as kube-scheduler counts it.
func Requests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// DaemonSetPod is the pod a DaemonSet would run on a new node, defaulted
// as the API server would admit it (DefaultRequests).
func DaemonSetPod(ds *appsv1.DaemonSet) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels}, Spec: *ds.Spec.Template.Spec.DeepCopy()}
	DefaultRequests(&p.Spec)
	return p
}

// ClaimNames are the PersistentVolumeClaims a pod mounts, generic ephemeral
// volumes' claims (named <pod>-<volume>) included.
func ClaimNames(pod *corev1.Pod) []string {
	var out []string
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		switch {
		case vol.PersistentVolumeClaim != nil:
			out = append(out, vol.PersistentVolumeClaim.ClaimName)
		case vol.Ephemeral != nil:
			out = append(out, ephemeral.VolumeClaimName(pod, vol))
		}
	}
	return out
}
