// Package disruption keeps the NodeClaim conditions that make a node a
// candidate for voluntary disruption: Consolidatable (quiet for
// consolidateAfter) and Drifted (no longer what its NodePool describes).
package disruption

import (
	"context"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// reasonNodePoolDrifted is the Drifted reason of a template hash mismatch.
const reasonNodePoolDrifted = "NodePoolDrifted"

// Controller sets Consolidatable and Drifted on NodeClaims, and keeps the
// hashes drift is judged by comparable.
type Controller struct {
	Client client.Client
	// Reader reads a NodeClaim around the cache after a write to it lost a
	// race; the cache when nil.
	Reader        client.Reader
	CloudProvider cloudprovider.CloudProvider
	Clock         clock.Clock
	races         lifecycle.Races
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.disruption").
		For(&v1.NodeClaim{}).
		// Only a change to the spec can drift a NodeClaim or change when it
		// may consolidate. The status changes with every NodeClaim of the
		// pool, and each change sent all of the pool's claims here again:
		// at 1,600 claims, a fifth of the controller's allocations.
		Watches(&v1.NodePool{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var claims v1.NodeClaimList
			if err := c.Client.List(ctx, &claims, client.MatchingLabels{v1.LabelNodePool: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
				return nil
			}
			out := make([]reconcile.Request, 0, len(claims.Items))
			for _, nc := range claims.Items {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
			}
			return out
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// An EC2NodeClass change may drift every NodeClaim launched from it.
		Watches(&awsv1.EC2NodeClass{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var claims v1.NodeClaimList
			if err := c.Client.List(ctx, &claims, client.UnsafeDisableDeepCopy); err != nil {
				return nil
			}
			var out []reconcile.Request
			for _, nc := range claims.Items {
				if ref := nc.Spec.NodeClassRef; ref != nil && ref.Group == awsv1.Group && ref.Name == o.GetName() {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
				}
			}
			return out
		})).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.Client.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	live := c.Reader
	if live == nil {
		live = c.Client
	}
	if err := c.races.Fresh(ctx, live, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	np := &v1.NodePool{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: nc.Labels[v1.LabelNodePool]}, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// Hashes stamped under another version are re-stamped before drift is
	// judged on them.
	if stored := nc.DeepCopy(); c.restamp(ctx, nc, np) {
		if err := lifecycle.Patch(ctx, c.Client, nc, stored); err != nil {
			return c.races.Retry(nc, err)
		}
		log.FromContext(ctx).V(1).Info("re-stamped nodeclaim hashes", "NodeClaim", map[string]string{"name": nc.Name})
	}
	stored := nc.DeepCopy()
	requeue := c.consolidatable(nc, np)
	drift, err := c.drifted(ctx, nc, np)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := metav1.NewTime(c.Clock.Now())
	if drift != "" {
		if cur := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted); cur == nil || cur.Status != metav1.ConditionTrue || cur.Reason != drift {
			meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: drift, ObservedGeneration: nc.Generation, LastTransitionTime: now})
		}
	} else {
		meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeDrifted)
	}
	if !equalConditions(stored.Status.Conditions, nc.Status.Conditions) {
		// Locked: the conditions list is written whole, and other
		// controllers write other conditions of it.
		if err := lifecycle.PatchStatus(ctx, c.Client, nc, stored); err != nil {
			return c.races.Retry(nc, err)
		}
	}
	// Drift that depends on the cloud (AMIs, subnets) is polled.
	if requeue == 0 || requeue > 5*time.Minute {
		requeue = 5 * time.Minute
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// consolidatable sets the condition and returns when to look again.
func (c *Controller) consolidatable(nc *v1.NodeClaim, np *v1.NodePool) time.Duration {
	after := np.Spec.Disruption.ConsolidateAfter
	if after.IsNever() {
		meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeConsolidatable)
		return 0
	}
	since := nc.Status.LastPodEventTime.Time
	if init := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized); init != nil && init.LastTransitionTime.After(since) {
		since = init.LastTransitionTime.Time
	}
	wait := since.Add(*after.Duration).Sub(c.Clock.Now())
	if wait > 0 {
		meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeConsolidatable)
		return wait
	}
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeConsolidatable) {
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue,
			Reason: "Consolidatable", ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())})
	}
	return 0
}

// restamp replaces the hashes a NodeClaim carries under another hash
// version (Karpenter's, or an older Joiner's) by the current ones, and
// reports whether it changed any. Hashes of another version cannot be
// compared with ours, so they say nothing about drift, and treating them as
// drift would replace every node after a migration. As Karpenter does on a
// version bump, a NodeClaim already found drifted on that hash keeps its old
// hash under the new version and stays drifted: whether it still is cannot
// be known.
func (c *Controller) restamp(ctx context.Context, nc *v1.NodeClaim, np *v1.NodePool) bool {
	drift := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted)
	stamp := func(hashKey, versionKey, version, driftReason string, hash func() string) bool {
		if nc.Annotations[versionKey] == version {
			return false
		}
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[versionKey] = version
		if drift == nil || drift.Status != metav1.ConditionTrue || drift.Reason != driftReason {
			nc.Annotations[hashKey] = hash()
		}
		return true
	}
	changed := stamp(v1.AnnotationNodePoolHash, v1.AnnotationNodePoolHashVersion, v1.NodePoolHashVersion, reasonNodePoolDrifted, np.Hash)
	if class := c.ec2NodeClass(ctx, nc); class != nil {
		changed = stamp(awsv1.AnnotationEC2NodeClassHash, awsv1.AnnotationEC2NodeClassHashVersion, awsv1.EC2NodeClassHashVersion, awsv1.ReasonNodeClassDrift, class.Hash) || changed
	}
	return changed
}

// ec2NodeClass is the EC2NodeClass the NodeClaim was launched from, or nil.
// A class that cannot be read is left for the next pass: the stamp waits,
// and so does the drift it would judge, which compares the same versions.
func (c *Controller) ec2NodeClass(ctx context.Context, nc *v1.NodeClaim) *awsv1.EC2NodeClass {
	class, _ := cloudprovider.EC2NodeClass(ctx, c.Client, nc.Spec.NodeClassRef)
	return class
}

// drifted returns the drift reason, or "".
func (c *Controller) drifted(ctx context.Context, nc *v1.NodeClaim, np *v1.NodePool) (string, error) {
	if nc.Annotations[v1.AnnotationNodePoolHashVersion] == v1.NodePoolHashVersion && nc.Annotations[v1.AnnotationNodePoolHash] != "" &&
		nc.Annotations[v1.AnnotationNodePoolHash] != np.Hash() {
		return reasonNodePoolDrifted, nil
	}
	reqs, err := requirements.FromNodeSelectorRequirements(np.Spec.Template.Spec.Requirements...)
	if err == nil && requirements.LabelsCompatible(nc.Labels, reqs) != nil {
		return "RequirementsDrifted", nil
	}
	reason, err := c.CloudProvider.IsDrifted(ctx, nc)
	return reason, err
}

func equalConditions(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status || a[i].Reason != b[i].Reason || !a[i].LastTransitionTime.Equal(&b[i].LastTransitionTime) {
			return false
		}
	}
	return true
}
