package simulate

import (
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	corev1 "k8s.io/api/core/v1"
)

// Override is base with over's objects in place of base's of the same
// kind and name, and over's others added: what --compare runs. base is not
// changed.
func Override(base, over *manifests.Objects) *manifests.Objects {
	out := *base
	out.NodePools = replace(base.NodePools, over.NodePools)
	out.EC2NodeClasses = replace(base.EC2NodeClasses, over.EC2NodeClasses)
	out.DaemonSets = replace(base.DaemonSets, over.DaemonSets)
	out.Deployments = replace(base.Deployments, over.Deployments)
	out.StatefulSets = replace(base.StatefulSets, over.StatefulSets)
	out.ReplicaSets = replace(base.ReplicaSets, over.ReplicaSets)
	out.Jobs = replace(base.Jobs, over.Jobs)
	out.BarePods = replace(base.BarePods, over.BarePods)
	out.PodDisruptionBudgets = replace(base.PodDisruptionBudgets, over.PodDisruptionBudgets)
	out.NodeOverlays = replace(base.NodeOverlays, over.NodeOverlays)
	out.Namespaces = replace(base.Namespaces, over.Namespaces)
	out.LimitRanges = append(append([]corev1.LimitRange(nil), base.LimitRanges...), over.LimitRanges...)
	out.Pods = append(append([]*corev1.Pod(nil), base.Pods...), over.Pods...)
	out.Nodes = replace(base.Nodes, over.Nodes)
	out.Claims = replace(base.Claims, over.Claims)
	out.Volumes = replace(base.Volumes, over.Volumes)
	out.StorageClasses = replace(base.StorageClasses, over.StorageClasses)
	return &out
}

type named interface {
	GetNamespace() string
	GetName() string
}

// replace is base with each of over in place of base's object of the same
// namespace and name, or appended.
func replace[T named](base, over []T) []T {
	out := append([]T(nil), base...)
	for _, o := range over {
		found := false
		for i, b := range out {
			if b.GetNamespace() == o.GetNamespace() && b.GetName() == o.GetName() {
				out[i], found = o, true
			}
		}
		if !found {
			out = append(out, o)
		}
	}
	return out
}
