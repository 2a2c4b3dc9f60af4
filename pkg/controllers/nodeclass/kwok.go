// Package nodeclass keeps EC2NodeClass status for the kwok provider, where
// there are no subnets, security groups or AMIs to resolve: an existing,
// valid EC2NodeClass is Ready.
package nodeclass

import (
	"context"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
	// The hash annotations, which NodeClaims launched from the class carry
	// and drift is judged by.
	if hash := nc.Hash(); nc.Annotations[awsv1.AnnotationEC2NodeClassHash] != hash || nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
		stored := nc.DeepCopy()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[awsv1.AnnotationEC2NodeClassHash] = hash
		nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
		if err := c.Client.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	stored := nc.DeepCopy()
	now := metav1.NewTime(c.Clock.Now())
	for _, t := range []string{"AMIsReady", "SubnetsReady", "SecurityGroupsReady", "InstanceProfileReady", "ValidationSucceeded", "Ready"} {
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t,
			ObservedGeneration: nc.Generation, LastTransitionTime: now})
	}
	if nc.Spec.Role != "" {
		nc.Status.InstanceProfile = "kwok_" + nc.Name
	} else if nc.Spec.InstanceProfile != nil {
		nc.Status.InstanceProfile = *nc.Spec.InstanceProfile
	}
	if meta.IsStatusConditionTrue(stored.Status.Conditions, "Ready") && stored.Status.InstanceProfile == nc.Status.InstanceProfile {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(c.Client.Status().Patch(ctx, nc, client.MergeFrom(stored)))
}
