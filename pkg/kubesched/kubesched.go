// Package kubesched is how kube-scheduler's default profile chooses a
// node for a pod among those that can take it: the filters Joiner's plans
// share with it (room, node selector and required affinity, taints), and
// its scoring (least allocated and balanced allocation, the system's
// default topology spreading, preferred node affinity and
// PreferNoSchedule taints), which spreads pods onto the emptiest nodes
// and apart from their siblings rather than packing them.
//
// Joiner plans where pods could go; kube-scheduler decides where they do.
// Disruption prices the difference (pkg/disruption's kube model) and the
// simulator binds pods with it, so that both see the same kube-scheduler.
package kubesched

import (
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Node is a node as the default profile weighs it: its labels and taints,
// its allocatable and what its pods leave free.
type Node struct {
	Node  *corev1.Node
	Alloc resources.Resources
	Free  resources.Resources
}

// Fits reports whether req fits in free, in every resource kube-scheduler's
// NodeResourcesFit filter checks.
func Fits(req, free resources.Resources) bool {
	if req.CPU > free.CPU || req.Memory > free.Memory || req.Pods > free.Pods || req.Ephemeral > free.Ephemeral {
		return false
	}
	return req.Ext == nil || req.Fits(free)
}

// Admits checks a pod's node selector and required node affinity (aff,
// worked out once per pod by nodeaffinity.GetRequiredNodeAffinity) and
// the node's NoSchedule and NoExecute taints.
func Admits(aff nodeaffinity.RequiredNodeAffinity, p *corev1.Pod, n *corev1.Node) bool {
	if ok, _ := aff.Match(n); !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// Score is the default profile's resource scoring of a node for a pod, in
// the continuous form the disruption model's stranding search weighs
// nodes by: NodeResourcesFit's LeastAllocated (the share of CPU and
// memory left free once the pod is placed, averaged) plus
// NodeResourcesBalancedAllocation (one less half the difference between
// the CPU and memory shares used), each on a 0-1 scale and of equal
// weight, as in the default profile. Pick (profile.go), which binds the
// simulator's pods, scores as kube-scheduler does, in whole numbers and
// with the profile's other plugins.
func Score(req, free, alloc resources.Resources) float64 {
	if alloc.CPU <= 0 || alloc.Memory <= 0 {
		return 0
	}
	cpu := float64(free.CPU-req.CPU) / float64(alloc.CPU)
	mem := float64(free.Memory-req.Memory) / float64(alloc.Memory)
	diff := cpu - mem
	if diff < 0 {
		diff = -diff
	}
	return (cpu+mem)/2 + (1 - diff/2)
}

// Take takes req out of free, as binding a pod there does.
func Take(free *resources.Resources, req resources.Resources) {
	free.CPU, free.Memory, free.Pods, free.Ephemeral = free.CPU-req.CPU, free.Memory-req.Memory, free.Pods-req.Pods, free.Ephemeral-req.Ephemeral
	if req.Ext != nil {
		*free = free.Sub(resources.Resources{Ext: req.Ext})
	}
}

// InterPod reports a pod with pod affinity, pod anti-affinity or topology
// spread constraints: where other pods run decides where it may go, which
// Pick does not model.
func InterPod(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	return len(p.Spec.TopologySpreadConstraints) > 0 || (a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil))
}
