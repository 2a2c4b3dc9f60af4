// Package expiration deletes NodeClaims that have reached their NodePool's
// expireAfter. Expiration is forceful: budgets do not hold it back, but the
// drain that follows still honours PDBs until terminationGracePeriod.
package expiration

import (
	"context"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Controller expires NodeClaims.
type Controller struct {
	Client client.Client
	Clock  clock.Clock
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.expiration").For(&v1.NodeClaim{}).Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.Client.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil || nc.Spec.ExpireAfter.IsNever() {
		return reconcile.Result{}, nil
	}
	expires := nc.CreationTimestamp.Add(*nc.Spec.ExpireAfter.Duration)
	if wait := expires.Sub(c.Clock.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := c.Client.Delete(ctx, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	metrics.NodeClaimsDisrupted.WithLabelValues("expired", nc.Labels[v1.LabelNodePool], nc.Labels[v1.LabelCapacityType]).Inc()
	log.FromContext(ctx).Info("disrupting nodeclaim(s) via delete, terminating 1 nodes", "NodeClaim", map[string]string{"name": nc.Name}, "reason", "expired", "expireAfter", nc.Spec.ExpireAfter.String())
	return reconcile.Result{}, nil
}
