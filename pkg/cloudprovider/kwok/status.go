package kwok

import (
	"context"
	"fmt"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeStatus is what the kubelet would report. kwok fills in only what is
// missing (conditions, addresses, defaults of 1k CPUs and 1Ti of memory), so
// the shape and the architecture set here are what the scheduler sees.
func (c *CloudProvider) nodeStatus(it *cloudprovider.InstanceType, labels map[string]string) corev1.NodeStatus {
	return corev1.NodeStatus{
		Capacity:    it.Capacity.DeepCopy(),
		Allocatable: it.Allocatable.DeepCopy(),
		NodeInfo: corev1.NodeSystemInfo{
			Architecture:    labels[corev1.LabelArchStable],
			OperatingSystem: labels[corev1.LabelOSStable],
		},
	}
}

// ensureStatus makes the Node report its instance type's capacity. The
// apiserver keeps the status a Node is created with (kubelets register that
// way; TestAPIServerKeepsNodeStatusOnCreate pins it), so after our own Create
// there is nothing to do. It matters for a retried Create that finds a Node
// without that status — created by something that did not set it, then given
// kwok's defaults of 1k CPUs and 1Ti — and the status subresource is the only
// way to write status once a Node exists.
//
// A Node its class shaped is given the type as the class (ref) shapes it
// now: a retry follows its launch within moments.
func (c *CloudProvider) ensureStatus(ctx context.Context, node *corev1.Node, ref *v1.NodeClassReference) error {
	it, ok := c.typeOf(node)
	if node.Annotations[AnnotationClassShaped] == "true" {
		its, _, err := c.typesFor(ctx, ref)
		if err != nil {
			return err
		}
		for _, t := range c.overlaid(node.Labels[v1.LabelNodePool], its) {
			if t.Name == node.Labels[corev1.LabelInstanceTypeStable] {
				it, ok = t, true
			}
		}
	}
	if !ok {
		return nil
	}
	if sameResources(node.Status.Capacity, it.Capacity) && sameResources(node.Status.Allocatable, it.Allocatable) {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	want := c.nodeStatus(it, node.Labels)
	node.Status.Capacity, node.Status.Allocatable = want.Capacity, want.Allocatable
	if err := c.kube.Status().Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("setting status of node %s: %w", node.Name, err)
	}
	return nil
}

// sameResources reports whether got has every quantity of want; extra entries
// in got (kwok adds none, but a test might) do not matter.
func sameResources(got, want corev1.ResourceList) bool {
	for name, q := range want {
		g, ok := got[name]
		if !ok || g.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
