// The marks a command puts on its candidates and takes off: the
// DisruptionReason condition and the disrupted taint.

package disruption

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
)

// setReason sets the NodeClaim's DisruptionReason: a command holds it.
func (c *Controller) setReason(ctx context.Context, name string, reason v1.DisruptionReason) error {
	return c.patchClaimStatus(ctx, name, func(nc *v1.NodeClaim) bool {
		return meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
			Reason: string(reason), ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())})
	})
}

// clearReason removes the DisruptionReason; a NodeClaim that is gone needs
// none removed.
func (c *Controller) clearReason(ctx context.Context, name string) error {
	err := c.patchClaimStatus(ctx, name, func(nc *v1.NodeClaim) bool {
		return meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeDisruptionReason)
	})
	return client.IgnoreNotFound(err)
}

// patchClaimStatus applies change to a fresh copy of the NodeClaim's status
// and patches it with optimistic locking, reading again and retrying on a
// conflict: a condition another controller wrote meanwhile is not lost.
func (c *Controller) patchClaimStatus(ctx context.Context, name string, change func(*v1.NodeClaim) bool) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var nc v1.NodeClaim
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nc); err != nil {
			return err
		}
		stored := nc.DeepCopy()
		if !change(&nc) {
			return nil
		}
		return c.Client.Status().Patch(ctx, &nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
	})
}

// patchNode is patchClaimStatus for a Node's spec. It reports whether the
// node changed; a node that is gone needs no change.
func (c *Controller) patchNode(ctx context.Context, name string, change func(*corev1.Node) bool) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var node corev1.Node
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
			return err
		}
		stored := node.DeepCopy()
		if changed = change(&node); !changed {
			return nil
		}
		return c.Client.Patch(ctx, &node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
	})
	return changed, client.IgnoreNotFound(err)
}

// release takes the disrupted taint off node (none when empty) and then
// the DisruptionReason off its NodeClaim. The reason goes last: it is what
// releaseStale finds a marked node by, so a node whose taint could not be
// removed keeps it and is released by a later pass.
func (c *Controller) release(ctx context.Context, node, claim string) error {
	if node != "" {
		if err := c.untaint(ctx, node); err != nil {
			return fmt.Errorf("removing the disrupted taint from node %s: %w", node, err)
		}
	}
	if err := c.clearReason(ctx, claim); err != nil {
		return fmt.Errorf("clearing the DisruptionReason of nodeclaim %s: %w", claim, err)
	}
	return nil
}

func (c *Controller) taint(ctx context.Context, name string) error {
	changed, err := c.patchNode(ctx, name, func(n *corev1.Node) bool {
		if taints.Has(n.Spec.Taints, v1.DisruptedNoScheduleTaint) {
			return false
		}
		n.Spec.Taints = append(n.Spec.Taints, v1.DisruptedNoScheduleTaint)
		return true
	})
	if changed && err == nil {
		log.FromContext(ctx).Info("tainted node", "Node", map[string]string{"name": name}, "taint.Key", v1.DisruptedNoScheduleTaint.Key, "taint.Value", "", "taint.Effect", string(v1.DisruptedNoScheduleTaint.Effect))
	}
	return err
}

// untaint removes the disrupted taint, unless the node is being deleted:
// its termination owns the taint then.
func (c *Controller) untaint(ctx context.Context, name string) error {
	_, err := c.patchNode(ctx, name, func(n *corev1.Node) bool {
		if n.DeletionTimestamp != nil {
			return false
		}
		var kept []corev1.Taint
		for _, t := range n.Spec.Taints {
			if !t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(n.Spec.Taints) {
			return false
		}
		n.Spec.Taints = kept
		return true
	})
	return err
}
