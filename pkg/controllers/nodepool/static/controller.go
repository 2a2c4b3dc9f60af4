// Package static keeps a static NodePool's count (spec.replicas, the
// StaticCapacity gate): NodeClaims of the pool's template are created while
// it has fewer than its replicas, within limits.nodes, and dropped, in
// ScaleDown's order, while it has more. Pods play no part: a static pool
// is the capacity its owner asked for, and pending pods get dynamic pools'
// nodes. Its drifted nodes are replaced one for one by the disruption loop
// (disruption.StaticDrift), never consolidated.
package static

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/provisioning"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
)

// Controller keeps static NodePools at their replicas.
type Controller struct {
	Client client.Client
	// Reader lists a pool's NodeClaims from the API server: a count read
	// from a cache that has not seen the last creates would create them
	// again.
	Reader        client.Reader
	Cluster       *state.Cluster
	CloudProvider cloudprovider.CloudProvider
	Clock         clock.Clock
	Scheduling    scheduling.Options
	// Resync is how often each static pool is checked even when nothing
	// changed; default one minute.
	Resync time.Duration
}

// Register adds the controller to the manager: a pool is reconciled when
// it changes and when one of its NodeClaims comes or goes.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("static.provisioning").
		For(&v1.NodePool{}).
		Watches(&v1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if np := o.GetLabels()[v1.LabelNodePool]; np != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: np}}}
			}
			return nil
		}), builder.WithPredicates(countChanges)).
		Complete(c)
}

// countChanges passes the NodeClaim events that change a pool's count: a
// NodeClaim made, gone, being deleted, or taken for a replacement. Status
// updates (launch, registration) change nothing here, and a thousand of
// them must not each list the pool.
var countChanges = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*v1.NodeClaim), e.ObjectNew.(*v1.NodeClaim)
		return (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			(meta.FindStatusCondition(o.Status.Conditions, v1.ConditionTypeDisruptionReason) == nil) != (meta.FindStatusCondition(n.Status.Conditions, v1.ConditionTypeDisruptionReason) == nil)
	},
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.Client.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// A pool being deleted takes its NodeClaims with it (they are its
	// dependents); one not Ready cannot launch.
	if np.Spec.Replicas == nil || np.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	resync := c.Resync
	if resync == 0 {
		resync = time.Minute
	}
	if !meta.IsStatusConditionTrue(np.Status.Conditions, "Ready") {
		return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
	}
	var list v1.NodeClaimList
	if err := c.Reader.List(ctx, &list, client.MatchingLabels{v1.LabelNodePool: np.Name}); err != nil {
		return reconcile.Result{}, err
	}
	var active []*v1.NodeClaim
	var deleting, disrupting int64
	for i := range list.Items {
		nc := &list.Items[i]
		switch {
		case nc.DeletionTimestamp != nil:
			deleting++
		case meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason) != nil:
			disrupting++
		default:
			active = append(active, nc)
		}
	}
	replicas, running := *np.Spec.Replicas, int64(len(active))
	logger := log.FromContext(ctx).WithValues("NodePool", map[string]string{"name": np.Name})
	switch {
	case running+disrupting < replicas:
		// A node being replaced counts until its replacement is up; one
		// being deleted does not, but holds its place under the limit.
		want := replicas - running - disrupting
		if q, ok := np.Spec.Limits[v1.ResourceNodes]; ok {
			if room := q.Value() - running - disrupting - deleting; room < want {
				want = max(room, 0)
			}
		}
		if want == 0 {
			logger.Info("nodepool node limit reached", "limit", np.Spec.Limits[v1.ResourceNodes], "current", running, "desired", replicas)
			return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
		}
		logger.Info("provisioning nodeclaims to satisfy replica count", "current", running, "desired", replicas, "provision-count", want)
		if err := c.scaleUp(ctx, np, want); err != nil {
			return reconcile.Result{}, fmt.Errorf("creating nodeclaims, %w", err)
		}
	case running > replicas:
		logger.Info("deprovisioning nodeclaims to satisfy replica count", "current", running, "desired", replicas, "deprovision-count", running-replicas)
		if err := c.scaleDown(ctx, active, int(running-replicas)); err != nil {
			return reconcile.Result{}, fmt.Errorf("failed to deprovision nodeclaims, %w", err)
		}
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

// scaleUp creates n NodeClaims of the pool's template, each planned as an
// empty node the pool's DaemonSets fit on.
func (c *Controller) scaleUp(ctx context.Context, np *v1.NodePool, n int64) error {
	its, err := c.CloudProvider.InstanceTypes(ctx, np)
	if err != nil {
		return err
	}
	daemons, err := c.Cluster.DaemonSetPods(ctx)
	if err != nil {
		return err
	}
	planned, err := scheduling.StaticNodeClaim(scheduling.NodePool{NodePool: np, InstanceTypes: its}, daemons, c.Scheduling)
	if err != nil {
		return err
	}
	for range n {
		nc, err := provisioning.NewNodeClaim(np, planned, c.Client.Scheme())
		if err != nil {
			return err
		}
		if err := c.Client.Create(ctx, nc); err != nil {
			return err
		}
		c.Cluster.Remember(ctx, nc)
		metrics.NodeClaimsCreated.WithLabelValues("provisioned", np.Name).Inc()
		log.FromContext(ctx).Info("created nodeclaim", "NodePool", map[string]string{"name": np.Name}, "NodeClaim", map[string]string{"name": nc.Name},
			"requests", planned.Requests.ResourceList(), "instance-types", provisioning.FirstN(typeNames(planned), 5))
	}
	return nil
}

// scaleDown deletes n of the pool's active NodeClaims; their termination
// drains them.
func (c *Controller) scaleDown(ctx context.Context, active []*v1.NodeClaim, n int) error {
	all, err := c.Cluster.Pods(ctx)
	if err != nil {
		return err
	}
	podsByNode := map[string][]*corev1.Pod{}
	for _, p := range all {
		if p.Spec.NodeName != "" {
			podsByNode[p.Spec.NodeName] = append(podsByNode[p.Spec.NodeName], p)
		}
	}
	for _, nc := range disruption.ScaleDown(active, podsByNode, n, c.Clock.Now()) {
		if err := c.Client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return err
		}
		log.FromContext(ctx).V(1).Info("deleting nodeclaim", "NodeClaim", map[string]string{"name": nc.Name})
	}
	return nil
}

func typeNames(nc *scheduling.NewNodeClaim) []string {
	out := make([]string, len(nc.InstanceTypes))
	for i, it := range nc.InstanceTypes {
		out[i] = it.Name
	}
	return out
}
