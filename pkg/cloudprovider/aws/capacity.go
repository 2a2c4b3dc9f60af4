package aws

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
)

// MemoryObserver learns an instance type's memory capacity from what its
// registered nodes report (instancetype.Provider.ObserveMemory).
type MemoryObserver interface {
	ObserveMemory(instanceType string, nc *awsv1.EC2NodeClass, memory resource.Quantity) bool
}

// ObserveCapacity learns the memory capacity of the node's instance type
// from the node, when the node booted from an image its class still maps
// to that type: another image may reserve memory differently, and a node
// of an image the class dropped says nothing of the next launch. Later
// plans and launches of the type under those images count on that memory
// rather than the estimate (Karpenter's discovered capacity).
func (c *CloudProvider) ObserveCapacity(ctx context.Context, node *corev1.Node, nodeClaim *v1.NodeClaim) error {
	if c.opts.Capacity == nil || nodeClaim.Status.ImageID == "" {
		return nil
	}
	typ := node.Labels[corev1.LabelInstanceTypeStable]
	memory, ok := node.Status.Capacity[corev1.ResourceMemory]
	if typ == "" || !ok {
		return nil
	}
	nc, err := c.nodeClassOf(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil || nc == nil || len(nc.Status.AMIs) == 0 {
		return err
	}
	drifted, err := c.amiDrifted(ctx, nc, nodeClaim)
	if err != nil || drifted {
		return err
	}
	if c.opts.Capacity.ObserveMemory(typ, nc, memory) {
		log.FromContext(ctx).V(1).Info("updating discovered capacity cache", "memory-capacity", memory.String(), "instance-type", typ)
	}
	return nil
}
