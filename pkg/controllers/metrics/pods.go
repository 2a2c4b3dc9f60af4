package metrics

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

// Pods observes two durations on the transitions the informer shows: a pod
// reaching Running (startup, from its creation), and a pod bound to the node
// of a NodeClaim created after it (bind, from the NodeClaim's creation,
// which is when Joiner nominated the pod to it). Watching transitions, not
// states, counts each pod once without remembering any: a pod already
// running when Joiner starts is not counted at all.
type Pods struct {
	Cache  cache.Cache
	Reader client.Reader
	Clock  clock.Clock
}

// Start implements manager.Runnable.
func (p *Pods) Start(ctx context.Context) error {
	h := handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*corev1.Pod], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			p.Observe(ctx, e.ObjectOld, e.ObjectNew)
		},
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := source.Kind(p.Cache, &corev1.Pod{}, h, predicate.TypedFuncs[*corev1.Pod]{}).Start(ctx, q); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// Observe records the durations old → cur completes.
func (p *Pods) Observe(ctx context.Context, old, cur *corev1.Pod) {
	now := p.Clock.Now()
	if old.Status.Phase != corev1.PodRunning && cur.Status.Phase == corev1.PodRunning {
		metrics.PodsStartupDuration.Observe(now.Sub(cur.CreationTimestamp.Time).Seconds())
	}
	if old.Spec.NodeName != "" || cur.Spec.NodeName == "" {
		return
	}
	var node corev1.Node
	if err := p.Reader.Get(ctx, client.ObjectKey{Name: cur.Spec.NodeName}, &node); err != nil || node.Labels[v1.LabelNodePool] == "" {
		return
	}
	var claims v1.NodeClaimList
	if err := p.Reader.List(ctx, &claims, client.MatchingFields{lifecycle.ProviderIDIndex: node.Spec.ProviderID}); err != nil || len(claims.Items) != 1 {
		return
	}
	created := claims.Items[0].CreationTimestamp.Time
	if created.After(cur.CreationTimestamp.Time) {
		metrics.AllocationBind.Observe(now.Sub(created).Seconds())
	}
}
