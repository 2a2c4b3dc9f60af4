// Package capacity learns instance types' real memory from the nodes that
// register: the provider's estimate is a guess until a node of the type
// reports what its kubelet sees (Karpenter's discovered capacity).
package capacity

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
)

// Observer learns from a registered node and its NodeClaim.
type Observer interface {
	ObserveCapacity(ctx context.Context, node *corev1.Node, nodeClaim *v1.NodeClaim) error
}

// Controller passes each node that registers to the Observer.
type Controller struct {
	Client   client.Client
	Observer Observer
}

// Register adds the controller to the manager. A node is looked at once,
// when it registers, and at start for every node already registered, so
// that a restart learns again what the last run knew.
func (c *Controller) Register(mgr ctrl.Manager) error {
	registered := func(o client.Object) bool { return o.GetLabels()[v1.LabelNodeRegistered] == "true" }
	return ctrl.NewControllerManagedBy(mgr).Named("node.capacity").
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return registered(e.Object) },
			UpdateFunc: func(e event.UpdateEvent) bool { return !registered(e.ObjectOld) && registered(e.ObjectNew) },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	claims, err := lifecycle.NodeClaimsOf(ctx, c.Client, node)
	if err != nil || len(claims) != 1 {
		return reconcile.Result{}, err
	}
	// A class deleted since says nothing of later launches.
	if err := c.Observer.ObserveCapacity(ctx, node, &claims[0]); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}
