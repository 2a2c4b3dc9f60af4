// Package repair is node repair, Karpenter's NodeRepair feature gate: a
// node whose health condition has been bad for longer than its policy
// tolerates is terminated at once, without waiting for PDBs, so that its
// pods get a working node. Repair stops while more than a fifth of the
// NodePool's nodes are unhealthy: then the fault is more likely shared
// (a bad AMI, a network outage) than the node's, and replacing nodes would
// only add churn.
package repair

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Policy is a node condition that makes a node unhealthy, and how long it
// may hold before the node is repaired.
type Policy struct {
	ConditionType   corev1.NodeConditionType
	ConditionStatus corev1.ConditionStatus
	Toleration      time.Duration
}

// EKSPolicies are the conditions Karpenter's AWS provider repairs: the
// kubelet's Ready, and the conditions the EKS node monitoring agent
// reports. Nodes without the agent, such as kwok's, only ever match Ready.
var EKSPolicies = []Policy{
	{corev1.NodeReady, corev1.ConditionFalse, 30 * time.Minute},
	{corev1.NodeReady, corev1.ConditionUnknown, 30 * time.Minute},
	{"AcceleratedHardwareReady", corev1.ConditionFalse, 10 * time.Minute},
	{"StorageReady", corev1.ConditionFalse, 30 * time.Minute},
	{"NetworkingReady", corev1.ConditionFalse, 30 * time.Minute},
	{"KernelReady", corev1.ConditionFalse, 30 * time.Minute},
	{"ContainerRuntimeReady", corev1.ConditionFalse, 30 * time.Minute},
}

// MaxUnhealthy is the share of a NodePool's nodes (of the cluster's, for
// NodeClaims without a NodePool) that may be unhealthy for repair to go
// on, rounded up: in a pool of three, one node may be repaired.
var MaxUnhealthy = intstr.FromString("20%")

// BlockedRequeue is how soon a blocked repair is looked at again.
const BlockedRequeue = 5 * time.Minute

// UnhealthyDisrupted counts NodeClaims repaired, by the condition that
// condemned them.
var UnhealthyDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "karpenter", Subsystem: "nodeclaims", Name: "unhealthy_disrupted_total",
	Help: "NodeClaims that node repair terminated because a node condition stayed unhealthy past its toleration, by condition, NodePool, capacity type and image.",
}, []string{"condition", "nodepool", "capacity_type", "image_id"})

func init() { crmetrics.Registry.MustRegister(UnhealthyDisrupted) }

// Controller repairs nodes that stay unhealthy.
type Controller struct {
	Client   client.Client
	Recorder record.EventRecorder
	Clock    clock.Clock
	Policies []Policy
}

// Register adds the controller to the manager. Only condition changes
// matter: otherwise a node is looked at again when its toleration ends.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("node.repair").
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return conditionsChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
		}})).
		Complete(c)
}

func conditionsChanged(old, cur *corev1.Node) bool {
	if len(old.Status.Conditions) != len(cur.Status.Conditions) {
		return true
	}
	for _, o := range old.Status.Conditions {
		n := condition(cur, o.Type)
		if n == nil || n.Status != o.Status || !n.LastTransitionTime.Equal(&o.LastTransitionTime) {
			return true
		}
	}
	return false
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	nc, err := c.nodeClaim(ctx, node)
	if err != nil || nc == nil {
		return reconcile.Result{}, err
	}
	bad, policy := c.unhealthy(node)
	if bad == nil {
		return reconcile.Result{}, nil
	}
	if left := bad.LastTransitionTime.Add(policy.Toleration).Sub(c.Clock.Now()); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	logger := log.FromContext(ctx).WithValues("Node", map[string]string{"name": node.Name}, "NodeClaim", map[string]string{"name": nc.Name})
	pool := nc.Labels[v1.LabelNodePool]
	if ok, msg, err := c.fewUnhealthy(ctx, pool); err != nil || !ok {
		if err != nil {
			return reconcile.Result{}, err
		}
		c.blocked(ctx, node, nc, pool, msg)
		return reconcile.Result{RequeueAfter: BlockedRequeue}, nil
	}
	// Terminating now means the drain stops waiting for PDBs and
	// do-not-disrupt: the pods are not running anyway. A NodeClaim already
	// being deleted, stuck draining an unhealthy node, is forced the same way.
	deleted, err := Terminate(ctx, c.Client, nc, c.Clock.Now())
	if err != nil || !deleted {
		return reconcile.Result{}, err
	}
	logger.Info("deleting unhealthy node", "condition", string(bad.Type), "status", string(bad.Status),
		"since", bad.LastTransitionTime.UTC().Format(time.RFC3339), "toleration", policy.Toleration.String())
	metrics.NodeClaimsDisrupted.WithLabelValues("unhealthy", pool, node.Labels[v1.LabelCapacityType]).Inc()
	UnhealthyDisrupted.WithLabelValues(snake(string(bad.Type)), pool, node.Labels[v1.LabelCapacityType], nc.Status.ImageID).Inc()
	return reconcile.Result{}, nil
}

// nodeClaim is the node's NodeClaim, or nil when it has none (not Joiner's
// node) or several (ambiguous, so nothing is touched).
func (c *Controller) nodeClaim(ctx context.Context, node *corev1.Node) (*v1.NodeClaim, error) {
	claims, err := lifecycle.NodeClaimsOf(ctx, c.Client, node)
	if err != nil || len(claims) != 1 {
		return nil, err
	}
	return &claims[0], nil
}

// unhealthy returns the node's condition that matches a policy and is due
// first, with that policy.
func (c *Controller) unhealthy(node *corev1.Node) (*corev1.NodeCondition, Policy) {
	return Unhealthy(node, c.Policies)
}

// Unhealthy returns the node's condition that matches one of the policies
// and is due first, with that policy; nil when none matches.
func Unhealthy(node *corev1.Node, policies []Policy) (*corev1.NodeCondition, Policy) {
	var due time.Time
	var bad *corev1.NodeCondition
	var which Policy
	for _, p := range policies {
		cond := condition(node, p.ConditionType)
		if cond == nil || cond.Status != p.ConditionStatus {
			continue
		}
		if at := cond.LastTransitionTime.Add(p.Toleration); bad == nil || at.Before(due) {
			bad, which, due = cond, p, at
		}
	}
	return bad, which
}

// fewUnhealthy reports whether the pool's share of unhealthy nodes, however
// recently they turned so, leaves room for repair; pool "" is the cluster.
func (c *Controller) fewUnhealthy(ctx context.Context, pool string) (bool, string, error) {
	return FewUnhealthy(ctx, c.Client, pool, func(n *corev1.Node) bool { bad, _ := c.unhealthy(n); return bad != nil })
}

// FewUnhealthy reports whether a pool whose nodes are unhealthy as the
// caller judges them leaves room for one more repair, and says why not
// when it does not. Node repair and EC2's status checks share the limit,
// so that together they never replace more than MaxUnhealthy of a pool.
func FewUnhealthy(ctx context.Context, kube client.Reader, pool string, unhealthy func(*corev1.Node) bool) (bool, string, error) {
	var nodes corev1.NodeList
	var opts []client.ListOption
	if pool != "" {
		opts = append(opts, client.MatchingLabels{v1.LabelNodePool: pool})
	}
	if err := kube.List(ctx, &nodes, opts...); err != nil {
		return false, "", err
	}
	bad := 0
	for i := range nodes.Items {
		if unhealthy(&nodes.Items[i]) {
			bad++
		}
	}
	allowed, err := intstr.GetScaledValueFromIntOrPercent(&MaxUnhealthy, len(nodes.Items), true)
	if err != nil {
		return false, "", err
	}
	if bad <= allowed {
		return true, "", nil
	}
	where := fmt.Sprintf("nodepool %q", pool)
	if pool == "" {
		where = "the cluster"
	}
	return false, fmt.Sprintf("Cannot repair the node: %d of %d nodes in %s are unhealthy, more than the %s node repair allows", bad, len(nodes.Items), where, MaxUnhealthy.String()), nil
}

// Forced reports whether the NodeClaim's termination deadline has come: its
// drain waits for nothing any more.
func Forced(nc *v1.NodeClaim, now time.Time) bool {
	ts, err := time.Parse(time.RFC3339, nc.Annotations[v1.AnnotationNodeClaimTerminationTimestamp])
	return err == nil && !ts.After(now)
}

// Terminate deletes a broken node's NodeClaim forcefully: its termination
// timestamp is set to now, so the drain does not wait for PDBs or
// do-not-disrupt. It reports whether this call started the deletion; a
// NodeClaim already being deleted only has its deadline brought forward.
func Terminate(ctx context.Context, kube client.Client, nc *v1.NodeClaim, now time.Time) (bool, error) {
	now = now.UTC()
	if !Forced(nc, now) {
		stored := nc.DeepCopy()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[v1.AnnotationNodeClaimTerminationTimestamp] = now.Format(time.RFC3339)
		if err := kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		log.FromContext(ctx).Info("annotated nodeclaim", "NodeClaim", map[string]string{"name": nc.Name}, v1.AnnotationNodeClaimTerminationTimestamp, nc.Annotations[v1.AnnotationNodeClaimTerminationTimestamp])
	}
	if nc.DeletionTimestamp != nil {
		return false, nil
	}
	if err := kube.Delete(ctx, nc); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

func (c *Controller) blocked(ctx context.Context, node *corev1.Node, nc *v1.NodeClaim, pool, msg string) {
	log.FromContext(ctx).Info("node repair blocked", "Node", map[string]string{"name": node.Name}, "reason", msg)
	c.Recorder.Event(node, corev1.EventTypeWarning, "NodeRepairBlocked", msg)
	c.Recorder.Event(nc, corev1.EventTypeWarning, "NodeRepairBlocked", msg)
	if pool == "" {
		return
	}
	np := &v1.NodePool{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: pool}, np); err == nil {
		c.Recorder.Event(np, corev1.EventTypeWarning, "NodeRepairBlocked", msg)
	}
}

func condition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// snake writes a condition type as the metric label Karpenter uses:
// AcceleratedHardwareReady becomes accelerated_hardware_ready.
func snake(s string) string {
	out := make([]byte, 0, len(s)+4)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'A' && ch <= 'Z' {
			if i > 0 {
				out = append(out, '_')
			}
			ch += 'a' - 'A'
		}
		out = append(out, ch)
	}
	return string(out)
}
