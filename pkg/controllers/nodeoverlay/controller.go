// Package nodeoverlay evaluates the NodeOverlays (NodeOverlay feature gate):
// it compiles them, finds their conflicts over every NodePool's instance
// types, hands the ones that apply to the overlay store that every reader
// of instance types goes through, and reports each overlay's verdict in its
// status as Karpenter does (ValidationSucceeded, then Ready).
//
// The evaluation is one for the whole cluster, since a conflict is between
// overlays and any pool may reveal it: every change of an overlay, a
// NodePool or an EC2NodeClass queues the same request.
package nodeoverlay

import (
	"context"
	"errors"
	"fmt"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/overlay"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Condition types of a NodeOverlay.
const (
	ConditionValidationSucceeded = "ValidationSucceeded"
	ConditionReady               = "Ready"
)

// Controller evaluates NodeOverlays.
type Controller struct {
	Client client.Client
	// CloudProvider gives the pools' instance types as the cloud sells
	// them: not overlaid, or overlays would be judged on their own output.
	CloudProvider cloudprovider.CloudProvider
	Store         *overlay.Store
	Clock         clock.Clock
	// Resync evaluates again this often even when nothing changed, so
	// offerings the cloud adds are priced; default 5 minutes.
	Resync time.Duration
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("nodeoverlay").
		Watches(&v1alpha1.NodeOverlay{}, all).
		Watches(&v1.NodePool{}, all).
		Watches(&awsv1.EC2NodeClass{}, all).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var overlays v1alpha1.NodeOverlayList
	if err := c.Client.List(ctx, &overlays); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodeoverlays, %w", err)
	}
	var pools v1.NodePoolList
	if err := c.Client.List(ctx, &pools); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodepools, %w", err)
	}
	var evaluated []overlay.Pool
	var unlisted []error
	typesByPool := map[string][]*cloudprovider.InstanceType{}
	for i := range pools.Items {
		np := &pools.Items[i]
		its, err := c.CloudProvider.InstanceTypes(ctx, np)
		if err != nil {
			// The pool waits (its types are refused as unevaluated) while
			// the others are priced, and the error below brings the next
			// try within the rate limiter's backoff, not the resync.
			unlisted = append(unlisted, fmt.Errorf("listing instance types for nodepool %q, %w", np.Name, err))
			continue
		}
		evaluated = append(evaluated, overlay.PoolOf(np))
		typesByPool[np.Name] = its
	}
	nos := make([]*v1alpha1.NodeOverlay, len(overlays.Items))
	for i := range overlays.Items {
		nos[i] = &overlays.Items[i]
	}
	applied, verdicts := overlay.Evaluate(nos, evaluated, typesByPool)
	c.Store.Set(applied, evaluated)
	for _, no := range nos {
		if err := c.writeStatus(ctx, no, verdicts[no.Name]); err != nil {
			return reconcile.Result{}, fmt.Errorf("updating nodeoverlay statuses, %w", client.IgnoreNotFound(err))
		}
	}
	if len(unlisted) > 0 {
		return reconcile.Result{}, errors.Join(unlisted...)
	}
	resync := c.Resync
	if resync == 0 {
		resync = 5 * time.Minute
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

// writeStatus sets the overlay's two conditions from its verdict. A
// condition that keeps its status keeps its transition time.
func (c *Controller) writeStatus(ctx context.Context, no *v1alpha1.NodeOverlay, v overlay.Verdict) error {
	stored := no.DeepCopy()
	now := metav1.NewTime(c.Clock.Now())
	valid := metav1.Condition{Type: ConditionValidationSucceeded, Status: metav1.ConditionTrue, Reason: v.Reason, Message: v.Message, ObservedGeneration: no.Generation, LastTransitionTime: now}
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: no.Generation, LastTransitionTime: now}
	if !v.Applied {
		valid.Status = metav1.ConditionFalse
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "UnhealthyDependents", ConditionValidationSucceeded+"=False"
	}
	meta.SetStatusCondition(&no.Status.Conditions, valid)
	meta.SetStatusCondition(&no.Status.Conditions, ready)
	if equality.Semantic.DeepEqual(stored.Status, no.Status) {
		return nil
	}
	return c.Client.Status().Patch(ctx, no, client.MergeFrom(stored))
}
