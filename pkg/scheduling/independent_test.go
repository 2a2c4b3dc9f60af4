package scheduling

import (
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// This file answers, without the solver's code, the questions a plan's
// checks ask: would a pod or a DaemonSet run on a node, and what does it
// request. It uses the matchers kube-scheduler itself uses
// (k8s.io/component-helpers), on a synthetic Node carrying the labels and
// taints a node would have, so that a bug in the solver's requirement
// algebra cannot hide in the checks of its own output.

// syntheticNode is a node of pool np and instance type it. extra labels
// (the zone and capacity type a NodeClaim settled on, say) are added.
func syntheticNode(np *v1.NodePool, it *cloudprovider.InstanceType, extra map[string]string) *corev1.Node {
	labels := map[string]string{v1.LabelNodePool: np.Name, v1.LabelNodeRegistered: "true", v1.LabelNodeInitialized: "true"}
	for k, v := range it.Labels {
		labels[k] = v
	}
	for k, v := range np.Spec.Template.Labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "synthetic", Labels: labels}, Spec: corev1.NodeSpec{Taints: np.Spec.Template.Spec.Taints}}
}

// podRunsOn is kube-scheduler's verdict on the pod's node affinity,
// nodeSelector and NoSchedule/NoExecute taints for the node.
func podRunsOn(pod *corev1.Pod, node *corev1.Node) bool {
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	return !untolerated
}

// podsRequest sums what pods request, as kube-scheduler counts it, with a
// pod slot each.
func podsRequest(pods []*corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(len(pods)), resource.DecimalSI)}
	for _, p := range pods {
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	return total
}

// daemonsOn are the DaemonSet pods that would run on node.
func daemonsOn(daemons []*corev1.Pod, node *corev1.Node) []*corev1.Pod {
	var out []*corev1.Pod
	for _, d := range daemons {
		if podRunsOn(d, node) {
			out = append(out, d)
		}
	}
	return out
}

// fitsIn reports whether requests fit allocatable, resource by resource.
func fitsIn(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		if a, ok := allocatable[name]; q.Sign() > 0 && (!ok || q.Cmp(a) > 0) {
			return false
		}
	}
	return true
}
