// Package tagging finishes what a launch could not: naming an instance after
// its NodeClaim when the tag call failed at launch (the role may not call
// ec2:CreateTags, or EC2 did not show the instance yet).
//
// The tags matter after the launch, not for it: garbage collection finds
// instances by provider ID, but people, cost reports and a NodeClaim lost
// before its provider ID was recorded find them by tag.
package tagging

import (
	"context"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Retry is how soon tagging is tried again after a failure. A refused
// permission is fixed by a person, not by a quick retry; a fixed pace
// (rather than the workqueue's backoff, which grows to minutes) tags the
// instance soon after the permission is granted.
const Retry = 15 * time.Second

// Tagger tags a NodeClaim's instance with the NodeClaim's name.
type Tagger interface {
	TagNodeClaim(ctx context.Context, nc *v1.NodeClaim) error
}

// Controller tags the instances of launched NodeClaims not yet marked
// tagged.
type Controller struct {
	Client   client.Client
	Tagger   Tagger
	Recorder record.EventRecorder
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.tagging").For(&v1.NodeClaim{}).Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.Client.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.Status.ProviderID == "" || nc.DeletionTimestamp != nil || nc.Annotations[awsv1.AnnotationInstanceTagged] == "true" {
		return reconcile.Result{}, nil
	}
	if err := c.Tagger.TagNodeClaim(ctx, nc); err != nil {
		log.FromContext(ctx).Error(err, "tagging the nodeclaim's instance", "NodeClaim", map[string]string{"name": nc.Name}, "provider-id", nc.Status.ProviderID)
		c.Recorder.Event(nc, corev1.EventTypeWarning, "TaggingFailed", err.Error())
		return reconcile.Result{RequeueAfter: Retry}, nil
	}
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[awsv1.AnnotationInstanceTagged] = "true"
	if err := lifecycle.Patch(ctx, c.Client, nc, stored); err != nil {
		return lifecycle.Retry(err)
	}
	return reconcile.Result{}, nil
}
