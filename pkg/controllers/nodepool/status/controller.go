// Package status keeps NodePool status current: the nodes and resources the
// pool has, whether its definition is valid, whether its NodeClass is ready,
// and the template hash that drift detection compares against.
package status

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Controller reconciles NodePool status.
type Controller struct {
	Client client.Client
	// Cluster reads the cache's NodeClaims in place.
	Cluster *state.Cluster
	Clock   clock.Clock
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodepool.status").
		For(&v1.NodePool{}).
		Watches(&v1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if np := o.GetLabels()[v1.LabelNodePool]; np != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: np}}}
			}
			return nil
		})).
		Watches(&awsv1.EC2NodeClass{}, handler.EnqueueRequestsFromMapFunc(c.poolsOfClass)).
		Complete(c)
}

func (c *Controller) poolsOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	var pools v1.NodePoolList
	if err := c.Client.List(ctx, &pools); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, np := range pools.Items {
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
		}
	}
	return out
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.Client.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if np.Annotations[v1.AnnotationNodePoolHash] != np.Hash() || np.Annotations[v1.AnnotationNodePoolHashVersion] != v1.NodePoolHashVersion {
		stored := np.DeepCopy()
		if np.Annotations == nil {
			np.Annotations = map[string]string{}
		}
		np.Annotations[v1.AnnotationNodePoolHash] = np.Hash()
		np.Annotations[v1.AnnotationNodePoolHashVersion] = v1.NodePoolHashVersion
		if err := c.Client.Patch(ctx, np, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	stored := np.DeepCopy()
	// The cache's own NodeClaims, read in place: the pool is reconciled on
	// every change to one of its NodeClaims, and deep copies of a thousand
	// of them each time were an eighth of the controller's allocations at
	// 10,000 pods, a List's shallow copies still 5% (docs/benchmarks.md §7).
	claims, err := c.Cluster.NodeClaims(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	var total resources.Resources
	nodes := int64(0)
	for _, nc := range claims {
		if nc.Labels[v1.LabelNodePool] != np.Name {
			continue
		}
		total.AddList(nc.Status.Capacity)
		nodes++
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0"),
		corev1.ResourcePods: resource.MustParse("0"), corev1.ResourceEphemeralStorage: resource.MustParse("0"),
	}
	for k, v := range total.ResourceList() {
		res[k] = v
	}
	res["nodes"] = *resource.NewQuantity(nodes, resource.DecimalSI)
	np.Status.Resources = res
	np.Status.Nodes = &nodes

	validErr := validate(np, c.Cluster.StaticCapacity)
	c.set(np, v1.ConditionTypeValidationSucceeded, validErr == nil, "NodePoolValidationFailed", errString(validErr))
	classOK, reason, message := c.nodeClassReady(ctx, np)
	c.set(np, v1.ConditionTypeNodeClassReady, classOK, reason, message)
	if meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeNodeRegistrationHealthy) == nil {
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeNodeRegistrationHealthy, Status: metav1.ConditionUnknown,
			Reason: "AwaitingReconciliation", ObservedGeneration: np.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())})
	}
	readyMsg := ""
	switch {
	case validErr != nil:
		readyMsg = "ValidationSucceeded=False"
	case !classOK:
		readyMsg = "NodeClassReady=False"
	}
	c.set(np, v1.ConditionTypeReady, validErr == nil && classOK, "NotReady", readyMsg)
	if !reflect.DeepEqual(stored.Status, np.Status) {
		if err := c.Client.Status().Patch(ctx, np, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	return reconcile.Result{RequeueAfter: time.Minute}, nil
}

func (c *Controller) set(np *v1.NodePool, t string, ok bool, badReason, message string) {
	status, reason := metav1.ConditionTrue, t
	if !ok {
		status, reason = metav1.ConditionFalse, badReason
	} else {
		message = ""
	}
	meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message,
		ObservedGeneration: np.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())})
}

func (c *Controller) nodeClassReady(ctx context.Context, np *v1.NodePool) (bool, string, string) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return false, "NodeClassNotFound", "nodeClassRef must reference a karpenter.k8s.aws EC2NodeClass"
	}
	var nc awsv1.EC2NodeClass
	if err := c.Client.Get(ctx, types.NamespacedName{Name: ref.Name}, &nc); err != nil {
		if apierrors.IsNotFound(err) {
			return false, "NodeClassNotFound", fmt.Sprintf("EC2NodeClass %q not found", ref.Name)
		}
		return false, "NodeClassNotFound", err.Error()
	}
	status, reason, message := nc.Readiness()
	if status == metav1.ConditionTrue {
		return true, "", ""
	}
	if reason != awsv1.ReasonNodeClassTerminating {
		reason = "NodeClassNotReady"
	}
	if message == "" {
		message = "EC2NodeClass is not ready"
	}
	return false, reason, message
}

// validate checks what the CRD's CEL cannot: requirements that parse, with
// values that are label values, and taints that are not repeated across
// taints and startupTaints; that the NodePool is not static unless the
// StaticCapacity gate is on; and that Joiner's spend cap, an annotation
// no schema checks, is a price.
func validate(np *v1.NodePool, static bool) error {
	if reason := state.StaticNodePool(np, static); reason != "" {
		return errors.New(reason)
	}
	if reason := state.InvalidRequirementValue(np); reason != "" {
		return errors.New(reason)
	}
	if _, err := requirements.FromNodeSelectorRequirements(np.Spec.Template.Spec.Requirements...); err != nil {
		return fmt.Errorf("spec.template.spec.requirements: %w", err)
	}
	if _, _, err := spendcap.Of(np); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, t := range append(append([]corev1.Taint{}, np.Spec.Template.Spec.Taints...), np.Spec.Template.Spec.StartupTaints...) {
		key := t.Key + ":" + string(t.Effect)
		if seen[key] {
			return fmt.Errorf("spec.template.spec: duplicate taint %s across taints and startupTaints; keep one", key)
		}
		seen[key] = true
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
