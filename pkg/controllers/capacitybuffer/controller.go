// Package capacitybuffer resolves CapacityBuffers (the CapacityBuffer
// gate): each buffer's pod, from its PodTemplate or its workload's
// template, and how many of it to keep room for. It writes Karpenter's
// ReadyForProvisioning condition and the status fields, keeps the buffer's
// virtual pods in the store every plan reads (package buffers), and starts
// a provisioning batch when they change. The provisioner writes the
// Provisioning condition from its plans.
package capacitybuffer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/joiner-autoscaler/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-autoscaler/joiner/pkg/buffers"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Conditions and reasons, as Karpenter v1.14.1 writes them.
const (
	ConditionReadyForProvisioning = "ReadyForProvisioning"
	ConditionProvisioning         = "Provisioning"
	ReasonResolved                = "Resolved"
	ReasonPodTemplateNotFound     = "PodTemplateNotFound"
	ReasonScalableRefNotFound     = "ScalableRefNotFound"
	ReasonResolutionFailed        = "ResolutionFailed"
)

// Resync re-reads each buffer this often: a workload's replicas, which a
// percentage follows, change without the buffer changing.
const Resync = 30 * time.Second

// Controller resolves CapacityBuffers.
type Controller struct {
	Client client.Client
	// Reader reads PodTemplates and workloads from the API server: a few
	// reads every half minute, where informers would hold every
	// ReplicaSet of the cluster.
	Reader client.Reader
	Store  *buffers.Store
	Clock  clock.Clock
	// Trigger starts a provisioning batch.
	Trigger func()
}

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("capacitybuffer").For(&v1beta1.CapacityBuffer{}).Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.Namespace + "/" + req.Name
	b := &v1beta1.CapacityBuffer{}
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) && c.Store.Set(key, nil) {
			c.Trigger()
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	stored := b.DeepCopy()
	tmpl, workloadReplicas, reason, err := c.resolve(ctx, b)
	ready := metav1.Condition{Type: ConditionReadyForProvisioning, Status: metav1.ConditionTrue, Reason: ReasonResolved,
		Message: "Pod template resolved successfully", ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())}
	var virtual []*corev1.Pod
	if err != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reason, err.Error()
	} else {
		// The pods are sized as the namespace would admit them, its
		// LimitRanges' defaults included.
		var ranges corev1.LimitRangeList
		if err := c.Client.List(ctx, &ranges, client.InNamespace(b.Namespace)); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing limitranges, %w", err)
		}
		admitted := pods.Template(*tmpl, b.Namespace, ranges.Items)
		n := buffers.Count(b.Spec, admitted.Spec, workloadReplicas)
		b.Status.Replicas = &n
		virtual = buffers.Pods(b, admitted, n, c.Clock.Now())
	}
	meta.SetStatusCondition(&b.Status.Conditions, ready)
	b.Status.ProvisioningStrategy = b.Spec.ProvisioningStrategy
	if !equality.Semantic.DeepEqual(stored.Status, b.Status) {
		if err := c.Client.Status().Patch(ctx, b, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	if c.Store.Set(key, virtual) {
		c.Trigger()
	}
	return reconcile.Result{RequeueAfter: Resync}, nil
}

// resolve finds the buffer's pod template and, for a workload, its
// replicas; on failure, the condition's reason and the error.
func (c *Controller) resolve(ctx context.Context, b *v1beta1.CapacityBuffer) (*corev1.PodTemplateSpec, *int32, string, error) {
	switch {
	case b.Spec.PodTemplateRef != nil:
		pt := &corev1.PodTemplate{}
		if err := c.Reader.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.PodTemplateRef.Name}, pt); err != nil {
			return nil, nil, reasonOf(err, ReasonPodTemplateNotFound), err
		}
		b.Status.PodTemplateRef = &v1beta1.LocalObjectRef{Name: pt.Name}
		gen := pt.Generation
		b.Status.PodTemplateGeneration = &gen
		return &pt.Template, nil, "", nil
	case b.Spec.ScalableRef != nil:
		b.Status.PodTemplateRef, b.Status.PodTemplateGeneration = nil, nil
		ref := b.Spec.ScalableRef
		if ref.APIGroup != "" && ref.APIGroup != appsv1.GroupName {
			return nil, nil, ReasonResolutionFailed, fmt.Errorf("unsupported scalableRef API group %q; a buffer follows an apps Deployment, StatefulSet or ReplicaSet", ref.APIGroup)
		}
		key := types.NamespacedName{Namespace: b.Namespace, Name: ref.Name}
		var tmpl corev1.PodTemplateSpec
		var replicas *int32
		switch ref.Kind {
		case "Deployment":
			w := &appsv1.Deployment{}
			if err := c.Reader.Get(ctx, key, w); err != nil {
				return nil, nil, reasonOf(err, ReasonScalableRefNotFound), err
			}
			tmpl, replicas = w.Spec.Template, w.Spec.Replicas
		case "StatefulSet":
			w := &appsv1.StatefulSet{}
			if err := c.Reader.Get(ctx, key, w); err != nil {
				return nil, nil, reasonOf(err, ReasonScalableRefNotFound), err
			}
			tmpl, replicas = w.Spec.Template, w.Spec.Replicas
		case "ReplicaSet":
			w := &appsv1.ReplicaSet{}
			if err := c.Reader.Get(ctx, key, w); err != nil {
				return nil, nil, reasonOf(err, ReasonScalableRefNotFound), err
			}
			tmpl, replicas = w.Spec.Template, w.Spec.Replicas
		default:
			return nil, nil, ReasonResolutionFailed, fmt.Errorf("unsupported kind %q; a buffer follows a Deployment, StatefulSet or ReplicaSet", ref.Kind)
		}
		if replicas == nil {
			one := int32(1)
			replicas = &one
		}
		return &tmpl, replicas, "", nil
	}
	return nil, nil, ReasonResolutionFailed, fmt.Errorf("Neither podTemplateRef nor scalableRef is set")
}

func reasonOf(err error, notFound string) string {
	if apierrors.IsNotFound(err) {
		return notFound
	}
	return ReasonResolutionFailed
}

// Provisioned writes each buffer's Provisioning condition from a plan's
// tallies, as Karpenter does after each provisioning pass: whether its
// virtual pods all fit on capacity that exists (or is launching), or some
// needed new capacity or found none. A buffer the plan did not see keeps
// its condition.
func (c *Controller) Provisioned(ctx context.Context, tallies map[string]*buffers.Tally) error {
	var list v1beta1.CapacityBufferList
	if err := c.Client.List(ctx, &list); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		b := &list.Items[i]
		stored := b.DeepCopy()
		cond := metav1.Condition{Type: ConditionProvisioning, Status: metav1.ConditionFalse, ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())}
		t := tallies[b.Namespace+"/"+b.Name]
		switch {
		case !meta.IsStatusConditionTrue(b.Status.Conditions, ConditionReadyForProvisioning):
			cond.Reason, cond.Message = "NotReadyForProvisioning", "Buffer is not ReadyForProvisioning"
		case b.Status.Replicas == nil || *b.Status.Replicas == 0:
			cond.Reason, cond.Message = "BufferEmpty", "Buffer has zero desired replicas"
		case t == nil:
			continue
		case t.New > 0 || t.Failed > 0:
			cond.Reason = "RequiresNewCapacity"
			cond.Message = fmt.Sprintf("%d/%d virtual pods required new capacity, %d failed", t.New, *b.Status.Replicas, t.Failed)
		case int32(t.Existing) == *b.Status.Replicas:
			cond.Status, cond.Reason = metav1.ConditionTrue, "FitsExistingCapacity"
			cond.Message = fmt.Sprintf("All %d virtual pods fit on existing capacity", t.Existing)
		default:
			continue
		}
		meta.SetStatusCondition(&b.Status.Conditions, cond)
		if equality.Semantic.DeepEqual(stored.Status, b.Status) {
			continue
		}
		if err := c.Client.Status().Patch(ctx, b, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("patching buffer %q: %w", b.Namespace+"/"+b.Name, err))
		}
	}
	return errors.Join(errs...)
}
