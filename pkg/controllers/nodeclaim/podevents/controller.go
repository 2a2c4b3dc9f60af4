// Package podevents records on each NodeClaim when a pod last arrived on or
// left its node, which starts the consolidateAfter clock.
package podevents

import (
	"context"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Dedupe bounds how often one NodeClaim is written: a node that keeps
// churning pods is busy either way.
const Dedupe = 10 * time.Second

// Controller watches pods and stamps their NodeClaim.
type Controller struct {
	Client client.Client
	Clock  clock.Clock
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.podevents").For(&corev1.Pod{}).Complete(c)
}

// Reconcile implements reconcile.Reconciler. Every event of a bound pod
// (binding, termination, deletion) counts.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := c.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pod.Spec.NodeName == "" {
		return reconcile.Result{}, nil
	}
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); err != nil || node.Spec.ProviderID == "" {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var claims v1.NodeClaimList
	if err := c.Client.List(ctx, &claims, client.MatchingFields{lifecycle.ProviderIDIndex: node.Spec.ProviderID}); err != nil || len(claims.Items) == 0 {
		return reconcile.Result{}, err
	}
	nc := &claims.Items[0]
	now := c.Clock.Now()
	if now.Sub(nc.Status.LastPodEventTime.Time) < Dedupe {
		return reconcile.Result{}, nil
	}
	stored := nc.DeepCopy()
	nc.Status.LastPodEventTime = metav1.NewTime(now)
	if err := lifecycle.PatchStatus(ctx, c.Client, nc, stored); err != nil {
		return lifecycle.Retry(err)
	}
	return reconcile.Result{}, nil
}
