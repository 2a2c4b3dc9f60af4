// Package lifecycle moves a NodeClaim through its life: launch the instance,
// register its node, wait for it to initialize, and on deletion tear both
// down in order. Launch and registration time out, so a NodeClaim never
// waits forever on a machine that will not come.
package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
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

// Workers is how many NodeClaims the lifecycle and termination controllers
// handle at once. A launch waits on the cloud for seconds, and the AWS
// provider merges concurrent launches into one fleet request: with fewer
// workers than a provisioning batch has NodeClaims, the batch launches in
// waves, and once the waves fall out of step each freed worker launches
// alone (200 NodeClaims on 64 workers took 52 fleet requests; on enough
// workers, 5; docs/benchmarks.md §6). Each reconcile only waits on I/O, and
// the client's QPS limit still bounds the load on the API server.
const Workers = 1000

// ProviderIDIndex indexes Nodes by spec.providerID and NodeClaims by status.providerID.
const ProviderIDIndex = "providerID"

// NodeClaimsOf lists the NodeClaims of a node, by provider ID: none for a
// node Joiner did not launch; more than one only if something is wrong.
func NodeClaimsOf(ctx context.Context, r client.Reader, node *corev1.Node) ([]v1.NodeClaim, error) {
	if node.Spec.ProviderID == "" {
		return nil, nil
	}
	var claims v1.NodeClaimList
	if err := r.List(ctx, &claims, client.MatchingFields{ProviderIDIndex: node.Spec.ProviderID}); err != nil {
		return nil, err
	}
	return claims.Items, nil
}

// Controller reconciles NodeClaims.
type Controller struct {
	Client client.Client
	// Reader reads around the cache, so a launch is never repeated because
	// the cache has not yet seen the provider ID of the last one.
	Reader          client.Reader
	CloudProvider   cloudprovider.CloudProvider
	Recorder        record.EventRecorder
	Clock           clock.Clock
	LaunchTTL       time.Duration
	RegistrationTTL time.Duration
	races           Races
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.lifecycle").
		For(&v1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(c.nodeToClaims)).
		// A launch waits on the cloud for seconds; one worker would queue a
		// scale-up's launches, and every deletion, behind each other. Each
		// NodeClaim is still reconciled by one worker at a time.
		WithOptions(controller.Options{MaxConcurrentReconciles: Workers}).
		Complete(c)
}

func (c *Controller) nodeToClaims(ctx context.Context, o client.Object) []reconcile.Request {
	node := o.(*corev1.Node)
	if node.Spec.ProviderID == "" {
		return nil
	}
	var claims v1.NodeClaimList
	if err := c.Client.List(ctx, &claims, client.MatchingFields{ProviderIDIndex: node.Spec.ProviderID}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, nc := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
	}
	return out
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.Client.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if err := c.races.Fresh(ctx, c.Reader, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("NodeClaim", map[string]string{"name": nc.Name}))
	if nc.DeletionTimestamp != nil {
		return c.finalize(ctx, nc)
	}
	if !controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer) {
		stored := nc.DeepCopy()
		controllerutil.AddFinalizer(nc, v1.TerminationFinalizer)
		if err := Patch(ctx, c.Client, nc, stored); err != nil {
			return c.races.Retry(nc, err)
		}
	}
	if nc.Status.ProviderID == "" {
		fresh := &v1.NodeClaim{}
		if err := c.Reader.Get(ctx, req.NamespacedName, fresh); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		// The cache can trail a delete this controller just made (after an
		// insufficient-capacity error): launching then would ask the cloud
		// again, under the claim's token, for a request it has refused.
		if fresh.DeletionTimestamp != nil {
			return c.finalize(ctx, fresh)
		}
		if fresh.Status.ProviderID == "" {
			return c.launch(ctx, fresh)
		}
		nc = fresh
	}
	if !isTrue(nc, v1.ConditionTypeRegistered) {
		return c.register(ctx, nc)
	}
	if !isTrue(nc, v1.ConditionTypeInitialized) {
		return c.initialize(ctx, nc, nil)
	}
	return reconcile.Result{}, nil
}

func isTrue(nc *v1.NodeClaim, t string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, t)
}

func (c *Controller) setCondition(nc *v1.NodeClaim, t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message,
		ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())})
	ready := metav1.ConditionTrue
	for _, dep := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized} {
		if !isTrue(nc, dep) {
			ready = metav1.ConditionFalse
		}
	}
	readyReason := "Ready"
	if ready != metav1.ConditionTrue {
		readyReason = "NotReady"
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeReady, Status: ready, Reason: readyReason,
		ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())})
}

func (c *Controller) launch(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	if age := c.Clock.Since(nc.CreationTimestamp.Time); age > c.LaunchTTL {
		logger.Info("deleting nodeclaim, launch timed out", "ttl", c.LaunchTTL.String())
		return reconcile.Result{}, client.IgnoreNotFound(c.Client.Delete(ctx, nc))
	}
	// Recorded before the cloud is asked: a launch whose result is not
	// written back (a failed write, a crash) is then resumed, not repeated.
	// The first attempt itself has nothing to resume, and is asked as one.
	attempt := nc
	if _, ok := nc.Annotations[v1.AnnotationLaunchAttempted]; !ok {
		attempt = nc.DeepCopy()
		stored := nc.DeepCopy()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[v1.AnnotationLaunchAttempted] = c.Clock.Now().UTC().Format(time.RFC3339)
		if err := Patch(ctx, c.Client, nc, stored); err != nil {
			return c.races.Retry(nc, err)
		}
	}
	created, err := c.CloudProvider.Create(ctx, attempt)
	switch {
	case cloudprovider.IsInsufficientCapacity(err):
		c.Recorder.Event(nc, corev1.EventTypeWarning, "InsufficientCapacityError", truncate(err.Error(), 300))
		logger.Error(err, "failed launching nodeclaim")
		return reconcile.Result{}, client.IgnoreNotFound(c.Client.Delete(ctx, nc))
	case cloudprovider.IsNodeClassNotReady(err):
		c.Recorder.Event(nc, corev1.EventTypeWarning, "NodeClassNotReady", truncate(err.Error(), 300))
		return reconcile.Result{}, client.IgnoreNotFound(c.Client.Delete(ctx, nc))
	case err != nil:
		stored := nc.DeepCopy()
		c.setCondition(nc, v1.ConditionTypeLaunched, metav1.ConditionUnknown, "LaunchFailed", truncate(err.Error(), 300))
		_ = PatchStatus(ctx, c.Client, nc, stored)
		return reconcile.Result{}, fmt.Errorf("launching nodeclaim: %w", err)
	}
	stored := nc.DeepCopy()
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	for k, v := range created.Labels {
		nc.Labels[k] = v
	}
	if len(created.Annotations) > 0 && nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	for k, v := range created.Annotations {
		nc.Annotations[k] = v
	}
	// Lost races are retried: Create returns the same machine again.
	if err := Patch(ctx, c.Client, nc, stored); err != nil {
		return c.races.Retry(nc, err)
	}
	stored = nc.DeepCopy()
	nc.Status.ProviderID = created.Status.ProviderID
	nc.Status.ImageID = created.Status.ImageID
	nc.Status.Capacity = created.Status.Capacity
	nc.Status.Allocatable = created.Status.Allocatable
	c.setCondition(nc, v1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "")
	c.setCondition(nc, v1.ConditionTypeRegistered, metav1.ConditionUnknown, "NodeNotFound", "Node not registered with cluster")
	c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "NodeNotFound", "Node not registered with cluster")
	if err := PatchStatus(ctx, c.Client, nc, stored); err != nil {
		return c.races.Retry(nc, err)
	}
	metrics.NodeClaimsLaunched.WithLabelValues(nc.Labels[v1.LabelNodePool]).Inc()
	logger.Info("launched nodeclaim",
		"provider-id", nc.Status.ProviderID,
		"instance-type", nc.Labels[corev1.LabelInstanceTypeStable],
		"zone", nc.Labels[corev1.LabelTopologyZone],
		"capacity-type", nc.Labels[v1.LabelCapacityType],
		"allocatable", nc.Status.Allocatable)
	return reconcile.Result{RequeueAfter: time.Second}, nil
}

func (c *Controller) nodeFor(ctx context.Context, nc *v1.NodeClaim) (*corev1.Node, error) {
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes, client.MatchingFields{ProviderIDIndex: nc.Status.ProviderID}); err != nil {
		return nil, err
	}
	switch len(nodes.Items) {
	case 0:
		return nil, nil
	case 1:
		node := &nodes.Items[0]
		if !c.races.Lost(node) {
			return node, nil
		}
		// Listed by name: the role Karpenter's chart grants lists and
		// watches nodes but does not get them.
		var fresh corev1.NodeList
		if err := c.Reader.List(ctx, &fresh, client.MatchingFields{"metadata.name": node.Name}); err != nil || len(fresh.Items) == 0 {
			return nil, err
		}
		return &fresh.Items[0], nil
	default:
		return nil, fmt.Errorf("%d nodes have provider ID %s", len(nodes.Items), nc.Status.ProviderID)
	}
}

func (c *Controller) launchedAt(nc *v1.NodeClaim) time.Time {
	if cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched); cond != nil {
		return cond.LastTransitionTime.Time
	}
	return nc.CreationTimestamp.Time
}

func (c *Controller) register(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	node, err := c.nodeFor(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node == nil {
		if c.Clock.Since(c.launchedAt(nc)) > c.RegistrationTTL {
			logger.Info("deleting nodeclaim, registration timed out", "ttl", c.RegistrationTTL.String())
			return reconcile.Result{}, client.IgnoreNotFound(c.Client.Delete(ctx, nc))
		}
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	stored := node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range nc.Labels {
		node.Labels[k] = v
	}
	node.Labels[v1.LabelNodeRegistered] = "true"
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k, v := range nc.Annotations {
		node.Annotations[k] = v
	}
	if node.Labels[v1.LabelDoNotSyncTaints] != "true" {
		for _, t := range append(append([]corev1.Taint{}, nc.Spec.Taints...), nc.Spec.StartupTaints...) {
			if !taints.Has(node.Spec.Taints, t) {
				node.Spec.Taints = append(node.Spec.Taints, t)
			}
		}
	}
	var kept []corev1.Taint
	for _, t := range node.Spec.Taints {
		if !t.MatchTaint(&v1.UnregisteredNoExecuteTaint) {
			kept = append(kept, t)
		}
	}
	node.Spec.Taints = kept
	controllerutil.AddFinalizer(node, v1.TerminationFinalizer)
	// Blocking owner deletion, as Karpenter does: a foreground deletion of
	// the NodeClaim waits for its Node.
	if err := controllerutil.SetOwnerReference(nc, node, c.Client.Scheme(), controllerutil.WithBlockOwnerDeletion(true)); err != nil {
		return reconcile.Result{}, err
	}
	// The lock keeps the taints and finalizers others write to the Node.
	if err := Patch(ctx, c.Client, node, stored); err != nil {
		return c.races.Retry(node, err)
	}
	storedNC := nc.DeepCopy()
	nc.Status.NodeName = node.Name
	c.setCondition(nc, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "")
	if err := PatchStatus(ctx, c.Client, nc, storedNC); err != nil {
		return c.races.Retry(nc, err)
	}
	metrics.NodeClaimsRegistered.WithLabelValues(nc.Labels[v1.LabelNodePool]).Inc()
	metrics.NodesCreated.WithLabelValues(nc.Labels[v1.LabelNodePool]).Inc()
	logger.Info("registered nodeclaim", "Node", map[string]string{"name": node.Name})
	// The node as the patch returned it: the cache's copy may predate it.
	return c.initialize(ctx, nc, node)
}

// initialize checks the node for readiness; node is nil to look it up.
func (c *Controller) initialize(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) (reconcile.Result, error) {
	if node == nil {
		var err error
		if node, err = c.nodeFor(ctx, nc); err != nil || node == nil {
			return reconcile.Result{RequeueAfter: 5 * time.Second}, err
		}
	}
	reason, message := "", ""
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		reason, message = "NodeNotReady", "Node status is NotReady"
	}
	for _, t := range node.Spec.Taints {
		if reason != "" {
			break
		}
		if taints.Has(nc.Spec.StartupTaints, t) {
			reason, message = "StartupTaintsExist", fmt.Sprintf("StartupTaint %q still exists", t.ToString())
		} else if v1.IsEphemeralTaint(t) {
			reason, message = "KnownEphemeralTaintsExist", fmt.Sprintf("KnownEphemeralTaint %q still exists", t.ToString())
		}
	}
	for name, q := range nc.Spec.Resources.Requests {
		if reason != "" {
			break
		}
		if !q.IsZero() && strings.Contains(string(name), "/") {
			if alloc, ok := node.Status.Allocatable[name]; !ok || alloc.IsZero() {
				reason, message = "ResourceNotRegistered", fmt.Sprintf("Resource %q was requested but not registered", name)
			}
		}
	}
	if reason != "" {
		stored := nc.DeepCopy()
		c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, reason, message)
		if err := PatchStatus(ctx, c.Client, nc, stored); err != nil {
			return c.races.Retry(nc, err)
		}
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if node.Labels[v1.LabelNodeInitialized] != "true" {
		storedNode := node.DeepCopy()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[v1.LabelNodeInitialized] = "true"
		if err := Patch(ctx, c.Client, node, storedNode); err != nil {
			return c.races.Retry(node, err)
		}
	}
	// The lock makes this pass the only one to initialize the NodeClaim: a
	// pass that read it stale, before another had, conflicts and reads
	// again. So the metric and the log line come once.
	stored := nc.DeepCopy()
	c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
	if err := PatchStatus(ctx, c.Client, nc, stored); err != nil {
		return c.races.Retry(nc, err)
	}
	metrics.NodeClaimsInitialized.WithLabelValues(nc.Labels[v1.LabelNodePool]).Inc()
	log.FromContext(ctx).Info("initialized nodeclaim", "Node", map[string]string{"name": node.Name}, "allocatable", node.Status.Allocatable)
	return reconcile.Result{}, nil
}

// finalize deletes the node (whose own finalizer drains it and waits for
// its volumes), then the instance, and only then lets the NodeClaim go, so
// nothing leaks.
func (c *Controller) finalize(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	// The drain's deadline: deletion plus terminationGracePeriod. Past it,
	// PDBs and do-not-disrupt no longer hold the node.
	if tgp := nc.Spec.TerminationGracePeriod; tgp != nil && nc.Annotations[v1.AnnotationNodeClaimTerminationTimestamp] == "" {
		stored := nc.DeepCopy()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[v1.AnnotationNodeClaimTerminationTimestamp] = nc.DeletionTimestamp.Add(tgp.Duration).UTC().Format(time.RFC3339)
		if err := Patch(ctx, c.Client, nc, stored); err != nil {
			return c.races.Retry(nc, err)
		}
	}
	if nc.Status.ProviderID != "" {
		node, err := c.nodeFor(ctx, nc)
		if err != nil {
			return reconcile.Result{}, err
		}
		if node != nil {
			if node.DeletionTimestamp == nil {
				if err := c.Client.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
					return reconcile.Result{}, err
				}
			}
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
	}
	// Without a provider ID the launch never returned, but it may have
	// started a machine; Delete finds it by the NodeClaim's name.
	gone, err := TerminateInstance(ctx, c.CloudProvider, nc)
	if err != nil {
		return TerminationFailed(ctx, c.Recorder, nc, nc.Status.ProviderID, err), nil
	}
	if !gone {
		if !isTrue(nc, v1.ConditionTypeInstanceTerminating) {
			stored := nc.DeepCopy()
			c.setCondition(nc, v1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "InstanceTerminating", "Instance is terminating")
			if err := PatchStatus(ctx, c.Client, nc, stored); err != nil {
				return c.races.Retry(nc, err)
			}
		}
		return reconcile.Result{RequeueAfter: InstancePoll}, nil
	}
	stored := nc.DeepCopy()
	controllerutil.RemoveFinalizer(nc, v1.TerminationFinalizer)
	if err := Patch(ctx, c.Client, nc, stored); err != nil {
		return c.races.Retry(nc, err)
	}
	metrics.NodeClaimsTerminated.WithLabelValues(nc.Labels[v1.LabelNodePool]).Inc()
	log.FromContext(ctx).Info("deleted nodeclaim", "Node", map[string]string{"name": nc.Status.NodeName}, "provider-id", nc.Status.ProviderID)
	return reconcile.Result{}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
