package garbagecollection

import (
	"context"
	"errors"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// collectClaims deletes the NodeClaims whose instance the cloud no longer
// lists (terminated from the console, reclaimed while Joiner was down), so
// that their pods get capacity again and the NodePool's count is true.
//
// As in Karpenter, only registered NodeClaims are judged: one whose Node
// never registered is the registration timeout's to end, and the cloud's
// list is not trusted alone. A Node that is still Ready keeps its
// NodeClaim, since its kubelet runs whatever the list says (the kubelet
// outlives an eventually consistent DescribeInstances). Instances the
// cloud reports as being deleted count as gone.
func (c *Controller) collectClaims(ctx context.Context, instances, claims []*v1.NodeClaim) error {
	present := map[string]bool{}
	for _, inst := range instances {
		if inst.DeletionTimestamp.IsZero() {
			present[inst.Status.ProviderID] = true
		}
	}
	var lost []*v1.NodeClaim
	for _, nc := range claims {
		if id := nc.Status.ProviderID; id != "" && !present[id] && nc.DeletionTimestamp.IsZero() &&
			meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) {
			lost = append(lost, nc)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	nodes, err := c.Cluster.Nodes(ctx)
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, n := range nodes {
		if n.Spec.ProviderID != "" && state.NodeReady(n) {
			ready[n.Spec.ProviderID] = true
		}
	}
	var errs []error
	for _, nc := range lost {
		if ready[nc.Status.ProviderID] {
			continue
		}
		if err := c.Client.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
			continue
		}
		log.FromContext(ctx).Info("garbage collecting nodeclaim with no cloudprovider representation",
			"NodeClaim", map[string]string{"name": nc.Name}, "Node", map[string]string{"name": nc.Status.NodeName}, "provider-id", nc.Status.ProviderID)
		metrics.NodeClaimsDisrupted.WithLabelValues("garbage_collected", nc.Labels[v1.LabelNodePool], nc.Labels[v1.LabelCapacityType]).Inc()
	}
	return errors.Join(errs...)
}
