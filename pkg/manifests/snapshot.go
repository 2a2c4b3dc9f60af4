package manifests

import (
	"fmt"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instancetype"
	"github.com/joiner-autoscaler/joiner/pkg/overlay"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
)

// Snapshot builds the planning input, applying the controller's rules: a
// NodePool whose EC2NodeClass is missing, or whose class's settings
// cannot be used, launches nothing, and the reason is returned so the
// plan can say it. Each pool's types are the catalog's as its class's
// nodes report them (instancetype.OfClass: the kubelet's settings, the
// disks, the AMI family).
func (o *Objects) Snapshot(instanceTypes []*cloudprovider.InstanceType) (scheduling.Snapshot, []state.NodePoolProblem) {
	snap := scheduling.Snapshot{}
	classes := map[string]bool{}
	classTypes := map[string][]*cloudprovider.InstanceType{}
	classErrs := map[string]error{}
	for _, nc := range o.EC2NodeClasses {
		classes[nc.Name] = true
		classTypes[nc.Name], classErrs[nc.Name] = instancetype.OfClass(instanceTypes, nc)
	}
	var problems []state.NodePoolProblem
	for _, np := range o.NodePools {
		ref := np.Spec.Template.Spec.NodeClassRef
		switch {
		case ref == nil:
			problems = append(problems, state.NodePoolProblem{NodePool: np.Name, Reason: "the NodePool has no nodeClassRef"})
		case ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass":
			problems = append(problems, state.NodePoolProblem{NodePool: np.Name, Reason: fmt.Sprintf("nodeClassRef %s/%s is not supported", ref.Group, ref.Kind)})
		case !classes[ref.Name]:
			problems = append(problems, state.NodePoolProblem{NodePool: np.Name, Reason: fmt.Sprintf("EC2NodeClass %q not found; add it to the manifests or fix spec.template.spec.nodeClassRef.name", ref.Name)})
		case classErrs[ref.Name] != nil:
			problems = append(problems, state.NodePoolProblem{NodePool: np.Name, Reason: classErrs[ref.Name].Error()})
		default:
			snap.NodePools = append(snap.NodePools, scheduling.NodePool{NodePool: np, InstanceTypes: classTypes[ref.Name]})
		}
	}
	if len(o.NodeOverlays) > 0 {
		pools := make([]overlay.Pool, len(snap.NodePools))
		byPool := map[string][]*cloudprovider.InstanceType{}
		for i, np := range snap.NodePools {
			pools[i] = overlay.PoolOf(np.NodePool)
			byPool[np.NodePool.Name] = np.InstanceTypes
		}
		var applied []*overlay.Overlay
		applied, o.OverlayVerdicts = overlay.Evaluate(o.NodeOverlays, pools, byPool)
		for i := range snap.NodePools {
			snap.NodePools[i].InstanceTypes = overlay.Apply(pools[i], snap.NodePools[i].InstanceTypes, applied)
		}
	}
	// Storage the manifests leave out exists in the cluster: it blocks no
	// pod here, and constrains nothing that can be known.
	ix := volumes.NewIndex(o.claims(), o.Volumes, o.StorageClasses)
	ix.Partial = true
	podsByNode := map[string][]*corev1.Pod{}
	snap.Volumes = map[string]volumes.Usage{}
	admitted := make([]*corev1.Pod, len(o.Pods))
	for i, p := range o.Pods {
		admitted[i] = pods.WithLimitRanges(p, o.LimitRanges)
	}
	for _, p := range ix.Apply(admitted, snap.Volumes) {
		if p.Spec.NodeName != "" {
			podsByNode[p.Spec.NodeName] = append(podsByNode[p.Spec.NodeName], p)
		} else {
			snap.Pods = append(snap.Pods, p)
		}
	}
	typeByName := map[string]*cloudprovider.InstanceType{}
	for _, it := range instanceTypes {
		typeByName[it.Name] = it
	}
	for _, n := range o.Nodes {
		var limits map[string]int
		if it, ok := typeByName[n.Labels[corev1.LabelInstanceTypeStable]]; ok {
			limits = it.AttachLimits
		}
		snap.Nodes = append(snap.Nodes, &scheduling.Node{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints,
			Allocatable: n.Status.Allocatable, Pods: podsByNode[n.Name], MarkedForDeletion: n.Spec.Unschedulable, AttachLimits: limits})
	}
	for _, ds := range o.DaemonSets {
		snap.DaemonSets = append(snap.DaemonSets, pods.WithLimitRanges(pods.DaemonSetPod(ds), o.LimitRanges))
	}
	if len(o.Namespaces) > 0 {
		snap.Namespaces = make(map[string]map[string]string, len(o.Namespaces))
		for _, ns := range o.Namespaces {
			snap.Namespaces[ns.Name] = ns.Labels
		}
	}
	return snap, problems
}

// claims are the manifests' claims, and the claims StatefulSets would
// create that the manifests do not hold.
func (o *Objects) claims() []*corev1.PersistentVolumeClaim {
	out := append([]*corev1.PersistentVolumeClaim{}, o.Claims...)
	given := map[string]bool{}
	for _, c := range o.Claims {
		given[c.Namespace+"/"+c.Name] = true
	}
	for _, c := range o.templateClaims {
		if !given[c.Namespace+"/"+c.Name] {
			out = append(out, c)
		}
	}
	return out
}
