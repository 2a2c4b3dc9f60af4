// Package termination drains a node that is being deleted before its
// instance goes: taint it, evict its pods through the Eviction API (so PDBs
// hold), wait for its volumes to detach, terminate the instance, then
// release the node. Each step's progress is recorded on the NodeClaim as
// Karpenter records it (Drained, VolumesDetached, InstanceTerminating).
package termination

import (
	"context"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// NodeNameIndex indexes pods and VolumeAttachments by spec.nodeName.
const NodeNameIndex = "spec.nodeName"

// Polls while waiting on something no watch of ours reports: pods leaving,
// and the terminationGracePeriod deadline while volumes detach.
const (
	drainPoll = time.Second
	// MinDrainTime is how long a node is drained at least, Karpenter's 5 s
	// (Controller.MinDrain).
	MinDrainTime = 5 * time.Second
	volumePoll   = 5 * time.Second
)

// Controller drains and releases nodes carrying Joiner's finalizer.
type Controller struct {
	Client        client.Client
	CloudProvider cloudprovider.CloudProvider
	Recorder      record.EventRecorder
	Clock         clock.Clock
	// MinDrain is how long a node is draining before it counts as drained,
	// even with nothing to evict (MinDrainTime in the operator; 0 counts it
	// at once).
	MinDrain time.Duration

	refusals refusals
}

// Register adds the controller to the manager, with the VolumeAttachment
// index and watch the wait for detachment needs: a detach wakes the node's
// termination at once.
func (c *Controller) Register(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &storagev1.VolumeAttachment{}, NodeNameIndex, func(o client.Object) []string {
		return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("node.termination").For(&corev1.Node{}).
		Watches(&storagev1.VolumeAttachment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*storagev1.VolumeAttachment).Spec.NodeName}}}
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: lifecycle.Workers}).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler. The steps run in order and
// each waits for the one before: drain, volumes, instance, finalizer.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("Node", map[string]string{"name": node.Name})
	ctx = log.IntoContext(ctx, logger)
	nc, err := c.nodeClaim(ctx, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	if nc != nil && nc.DeletionTimestamp == nil {
		if err := c.Client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	// A node whose kubelet stopped reporting and whose instance is gone
	// has nothing left to drain: its pods' deletions would never be
	// confirmed. Karpenter lets such a node go at once.
	if gone, err := c.instanceGone(ctx, node); err != nil {
		return reconcile.Result{}, err
	} else if gone {
		stored := node.DeepCopy()
		controllerutil.RemoveFinalizer(node, v1.TerminationFinalizer)
		if err := lifecycle.Patch(ctx, c.Client, node, stored); err != nil {
			return lifecycle.Retry(err)
		}
		c.terminated(node)
		logger.Info("deleted node", "reason", "the node is not ready and its instance is gone")
		return reconcile.Result{}, nil
	}
	if !taints.Has(node.Spec.Taints, v1.DisruptedNoScheduleTaint) {
		stored := node.DeepCopy()
		node.Spec.Taints = append(node.Spec.Taints, v1.DisruptedNoScheduleTaint)
		if err := lifecycle.Patch(ctx, c.Client, node, stored); err != nil {
			return lifecycle.Retry(err)
		}
		logger.Info("tainted node", "taint.Key", v1.DisruptedNoScheduleTaint.Key, "taint.Value", "", "taint.Effect", string(v1.DisruptedNoScheduleTaint.Effect))
	}
	var deadline *time.Time
	if nc != nil {
		if ts, err := time.Parse(time.RFC3339, nc.Annotations[v1.AnnotationNodeClaimTerminationTimestamp]); err == nil {
			deadline = &ts
		}
	}

	remaining, err := c.drain(ctx, node, nc, deadline)
	if err != nil {
		return reconcile.Result{}, err
	}
	if remaining > 0 {
		if err := c.record(ctx, nc, v1.ConditionTypeDrained, metav1.ConditionUnknown, "Draining", "Draining"); err != nil {
			return lifecycle.Retry(err)
		}
		return reconcile.Result{RequeueAfter: drainPoll}, nil
	}
	// Nothing left to drain counts only once the node has been draining for
	// MinDrainTime, as Karpenter waits: kube-scheduler may not have seen the
	// taint yet and still bind a pod that the instance's end would kill.
	if nc != nil {
		cur := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrained)
		if c.MinDrain > 0 && (cur == nil || (cur.Status == metav1.ConditionUnknown && c.Clock.Since(cur.LastTransitionTime.Time) < c.MinDrain)) {
			if err := c.record(ctx, nc, v1.ConditionTypeDrained, metav1.ConditionUnknown, "Draining", "Draining"); err != nil {
				return lifecycle.Retry(err)
			}
			return reconcile.Result{RequeueAfter: drainPoll}, nil
		}
	}
	if err := c.record(ctx, nc, v1.ConditionTypeDrained, metav1.ConditionTrue, "Drained", ""); err != nil {
		return lifecycle.Retry(err)
	}

	if res, wait, err := c.awaitVolumes(ctx, node, nc, deadline); wait {
		return res, err
	}

	// A node whose NodeClaim is gone (its finalizer removed by hand) still
	// has an instance behind it; its provider ID is enough to delete it.
	instance := nc
	if instance == nil && node.Spec.ProviderID != "" {
		instance = &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: node.Name}, Status: v1.NodeClaimStatus{ProviderID: node.Spec.ProviderID}}
	}
	if instance != nil {
		gone, err := lifecycle.TerminateInstance(ctx, c.CloudProvider, instance)
		if err != nil {
			var about client.Object = node
			if nc != nil {
				about = nc
			}
			return lifecycle.TerminationFailed(ctx, c.Recorder, about, instance.Status.ProviderID, err), nil
		}
		if !gone {
			if err := c.record(ctx, nc, v1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "InstanceTerminating", "Instance is terminating"); err != nil {
				return lifecycle.Retry(err)
			}
			return reconcile.Result{RequeueAfter: lifecycle.InstancePoll}, nil
		}
	}

	stored := node.DeepCopy()
	controllerutil.RemoveFinalizer(node, v1.TerminationFinalizer)
	if err := lifecycle.Patch(ctx, c.Client, node, stored); err != nil {
		return lifecycle.Retry(err)
	}
	c.terminated(node)
	logger.Info("deleted node")
	return reconcile.Result{}, nil
}

// instanceGone reports a node that is not Ready whose instance the cloud
// no longer has. A Ready node is not asked about: right after a launch a
// cloud's listing may not show the instance yet, and a Ready kubelet is
// proof enough that it runs.
func (c *Controller) instanceGone(ctx context.Context, node *corev1.Node) (bool, error) {
	if node.Spec.ProviderID == "" || state.NodeReady(node) {
		return false, nil
	}
	_, err := c.CloudProvider.Get(ctx, node.Spec.ProviderID)
	if cloudprovider.IsNodeClaimNotFound(err) {
		return true, nil
	}
	if err != nil {
		log.FromContext(ctx).V(1).Info("could not tell whether the instance of a node that is not ready still exists", "error", err.Error())
	}
	return false, nil
}

func (c *Controller) nodeClaim(ctx context.Context, node *corev1.Node) (*v1.NodeClaim, error) {
	claims, err := lifecycle.NodeClaimsOf(ctx, c.Client, node)
	if err != nil || len(claims) == 0 {
		return nil, err
	}
	return &claims[0], nil
}

// record sets a condition on the NodeClaim when it changes. It works on the
// latest copy the client has (this reconcile may have deleted the
// NodeClaim since reading it), and the write carries an optimistic lock
// (see lifecycle.PatchStatus). A NodeClaim that is already gone records
// nothing and holds nothing up: the node's termination goes on without it.
func (c *Controller) record(ctx context.Context, nc *v1.NodeClaim, t string, status metav1.ConditionStatus, reason, message string) error {
	if nc == nil {
		return nil
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if cur := meta.FindStatusCondition(nc.Status.Conditions, t); cur != nil && cur.Status == status && cur.Reason == reason && cur.Message == message {
		return nil
	}
	stored := nc.DeepCopy()
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message,
		ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())})
	return client.IgnoreNotFound(lifecycle.PatchStatus(ctx, c.Client, nc, stored))
}

// terminated counts a node let go, and how long it took from its deletion.
func (c *Controller) terminated(node *corev1.Node) {
	pool := node.Labels[v1.LabelNodePool]
	metrics.NodesTerminated.WithLabelValues(pool).Inc()
	if node.DeletionTimestamp != nil {
		metrics.NodesTerminationDuration.WithLabelValues(pool).Observe(c.Clock.Since(node.DeletionTimestamp.Time).Seconds())
	}
}
