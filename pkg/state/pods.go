// Package state reads the cluster as the scheduling core needs it: pending
// pods, nodes with their pods, in-flight NodeClaims and DaemonSets.
package state

import (
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IsProvisionable reports whether a pod is waiting for capacity: the
// scheduler found no node for it, it is not bound, not preempting its way in,
// not a DaemonSet or mirror pod, and not finished or going away.
func IsProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Status.NominatedNodeName != "" {
		return false
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// IsTerminal reports whether a pod no longer uses its node's resources.
func IsTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// DaemonSetPod is the pod a DaemonSet would run on a new node.
func DaemonSetPod(ds *appsv1.DaemonSet) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels}, Spec: *ds.Spec.Template.Spec.DeepCopy()}
}

// NodeClaimCondition returns the status of a NodeClaim condition.
func NodeClaimCondition(nc *v1.NodeClaim, t string) metav1.ConditionStatus {
	for _, c := range nc.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}
