// Package podevents records on each NodeClaim when a pod last arrived on or
// left its node, which starts the consolidateAfter clock.
package podevents

import (
	"context"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Dedupe bounds how often one NodeClaim is written: a node that keeps
// churning pods is busy either way.
const Dedupe = 10 * time.Second

// Controller watches pods and stamps the NodeClaim of the node they
// arrived on or left. Its requests are node names.
type Controller struct {
	Client client.Client
	Clock  clock.Clock
}

// Register adds the controller to the manager. Only the events Moved
// names reach it; the pod's node is the request.
func (c *Controller) Register(mgr ctrl.Manager) error {
	enqueue := func(pod *corev1.Pod, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: pod.Spec.NodeName}})
	}
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.podevents").
		Watches(&corev1.Pod{}, handler.Funcs{
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if old, cur := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod); Moved(old, cur) {
					enqueue(cur, q)
				}
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if pod, ok := e.Object.(*corev1.Pod); ok && Moved(pod, nil) {
					enqueue(pod, q)
				}
			},
		}).Complete(c)
}

// Moved reports a pod event that changes what its node runs, the events
// Karpenter counts: the pod was bound, went terminal, or began terminating
// (cur nil: it was deleted outright, never seen terminating). Any other
// update of a bound pod (a status heartbeat, a restart of a crash-looping
// container, a label) is not one: counting those would keep a node with a
// chatty pod from ever being quiet for consolidateAfter. Pods the informer
// lists at start arrive as creations and are not counted either, so a
// restart does not restart every node's clock.
func Moved(old, cur *corev1.Pod) bool {
	if cur == nil {
		return old.Spec.NodeName != "" && old.DeletionTimestamp == nil && !pods.IsTerminal(old)
	}
	if cur.Spec.NodeName == "" {
		return false
	}
	bound := old.Spec.NodeName == ""
	terminal := !pods.IsTerminal(old) && pods.IsTerminal(cur)
	terminating := old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil
	return bound || terminal || terminating
}

// Reconcile implements reconcile.Reconciler for the node named in req.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, req.NamespacedName, node); err != nil || node.Spec.ProviderID == "" {
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
	// Unlocked: the patch holds one timestamp and no list, so it cannot
	// undo another's write, and a stale cache cannot make it lose a race.
	// 10,000 pods binding stamp their nodes' claims while the lifecycle
	// writes their conditions.
	if err := c.Client.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, nil
}
