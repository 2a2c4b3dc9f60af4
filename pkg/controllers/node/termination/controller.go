// Package termination drains a node that is being deleted before its
// instance goes: taint it, evict its pods through the Eviction API (so PDBs
// hold), terminate the instance, then release the node.
package termination

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// NodeNameIndex indexes pods by spec.nodeName.
const NodeNameIndex = "spec.nodeName"

// Controller drains and releases nodes carrying Joiner's finalizer.
type Controller struct {
	Client        client.Client
	CloudProvider cloudprovider.CloudProvider
	Recorder      record.EventRecorder
	Clock         clock.Clock
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("node.termination").For(&corev1.Node{}).Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("Node", map[string]string{"name": node.Name})
	nc, err := c.nodeClaim(ctx, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	if nc != nil && nc.DeletionTimestamp == nil {
		if err := c.Client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	if !taints.Has(node.Spec.Taints, v1.DisruptedNoScheduleTaint) {
		stored := node.DeepCopy()
		node.Spec.Taints = append(node.Spec.Taints, v1.DisruptedNoScheduleTaint)
		if err := c.Client.Patch(ctx, node, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, err
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
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if nc != nil {
		if err := c.CloudProvider.Delete(ctx, nc); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("terminating instance: %w", err)
		}
	}
	stored := node.DeepCopy()
	controllerutil.RemoveFinalizer(node, v1.TerminationFinalizer)
	if err := c.Client.Patch(ctx, node, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	logger.Info("deleted node")
	return reconcile.Result{}, nil
}

func (c *Controller) nodeClaim(ctx context.Context, node *corev1.Node) (*v1.NodeClaim, error) {
	claims, err := lifecycle.NodeClaimsOf(ctx, c.Client, node)
	if err != nil || len(claims) == 0 {
		return nil, err
	}
	return &claims[0], nil
}

// drain evicts the pods that must leave and returns how many are left.
// DaemonSet pods, mirror pods and pods that tolerate the disrupted taint stay;
// they go with the node.
func (c *Controller) drain(ctx context.Context, node *corev1.Node, nc *v1.NodeClaim, deadline *time.Time) (int, error) {
	var onNode corev1.PodList
	if err := c.Client.List(ctx, &onNode, client.MatchingFields{NodeNameIndex: node.Name}); err != nil {
		return 0, err
	}
	// Largest first, the order consolidation plans for.
	sort.SliceStable(onNode.Items, func(i, j int) bool { return disruption.EvictFirst(&onNode.Items[i], &onNode.Items[j]) })
	remaining := 0
	for i := range onNode.Items {
		pod := &onNode.Items[i]
		if pods.IsTerminal(pod) || !mustLeave(pod) {
			continue
		}
		remaining++
		if pod.DeletionTimestamp != nil {
			continue
		}
		// Near the deadline, delete the pod so its own grace period ends by
		// the deadline, whatever PDBs and do-not-disrupt say.
		if deadline != nil {
			grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
			if pod.Spec.TerminationGracePeriodSeconds != nil {
				grace = *pod.Spec.TerminationGracePeriodSeconds
			}
			left := deadline.Sub(c.Clock.Now())
			if left <= time.Duration(grace)*time.Second {
				g := int64(left.Seconds())
				if g < 1 {
					g = 1
				}
				if err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(g)); client.IgnoreNotFound(err) != nil {
					return remaining, err
				}
				if nc != nil {
					c.Recorder.Event(nc, corev1.EventTypeWarning, "TerminationGracePeriodExpiring",
						fmt.Sprintf("Deleted pod %s/%s with a %ds grace period: the node's terminationGracePeriod ends at %s", pod.Namespace, pod.Name, g, deadline.Format(time.RFC3339)))
				}
				continue
			}
		}
		// do-not-disrupt pods wait for the deadline; without one the drain waits for them.
		if pods.DoNotDisrupt(pod) {
			continue
		}
		err := c.Client.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
		switch {
		case err == nil:
			c.Recorder.Event(pod, corev1.EventTypeNormal, "Evicted", "Evicted pod: node "+node.Name+" is terminating")
		case apierrors.IsTooManyRequests(err):
			// A PDB does not allow it now; try again.
			c.Recorder.Event(node, corev1.EventTypeWarning, "FailedDraining", fmt.Sprintf("Failed to evict pod %s/%s: %v", pod.Namespace, pod.Name, err))
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			return remaining, fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return remaining, nil
}

func mustLeave(pod *corev1.Pod) bool {
	if pods.IsOwnedByNode(pod) {
		return false
	}
	for _, t := range pod.Spec.Tolerations {
		if t.ToleratesTaint(nopLogger, &v1.DisruptedNoScheduleTaint, false) {
			return false
		}
	}
	return true
}
