// Package nodeclass keeps EC2NodeClass status: resolved from AWS for the
// aws provider (AWSController), and for the kwok provider, where there are
// no subnets, security groups or AMIs to resolve, simply Ready
// (KwokController). Both stamp the hash annotations and decide Ready the
// same way.
package nodeclass

import (
	"context"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// KwokController marks EC2NodeClasses ready when the kwok provider runs.
type KwokController struct {
	Client client.Client
	Clock  clock.Clock
}

// Register adds the controller to the manager.
func (c *KwokController) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclass.kwok").For(&awsv1.EC2NodeClass{}).Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *KwokController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &awsv1.EC2NodeClass{}
	if err := c.Client.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if err := stampMetadata(ctx, c.Client, nc, false); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	stored := nc.DeepCopy()
	now := c.Clock.Now()
	for _, t := range awsv1.ReadyDependents {
		setCondition(nc, t, metav1.ConditionTrue, t, "", now)
	}
	if nc.Spec.Role != "" {
		nc.Status.InstanceProfile = "kwok_" + nc.Name
	} else if nc.Spec.InstanceProfile != nil {
		nc.Status.InstanceProfile = *nc.Spec.InstanceProfile
	}
	setReady(nc, now)
	return reconcile.Result{}, client.IgnoreNotFound(patchStatus(ctx, c.Client, stored, nc))
}
