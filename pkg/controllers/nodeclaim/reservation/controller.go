// Package reservation follows the capacity reservations NodeClaims run in.
// A Capacity Block ends at a fixed time, and EC2 takes its instances back
// from 30 minutes before: its NodeClaims are drained 40 minutes before the
// end, as Karpenter does. A node whose reservation its class no longer
// lists is asked of EC2: still in it, the node has drifted (the class no
// longer selects it; the cloud provider's drift says so) and is replaced;
// out of it (cancelled, expired), EC2 runs it on demand, and it becomes an
// ordinary on-demand node: its capacity-type label says so, and
// consolidation prices it as such, as Karpenter's capacity-type controller
// does from EC2's view.
package reservation

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/capacityreservation"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

// Controller reconciles NodeClaims launched into reservations.
type Controller struct {
	Client   client.Client
	Recorder record.EventRecorder
	Clock    clock.Clock
	// Instances says which reservation an instance runs in now.
	Instances Instances
}

// Instances reads an instance's reservation from a fresh description:
// found is false while EC2 does not know the instance (just launched, or
// gone).
type Instances interface {
	InstanceReservation(ctx context.Context, providerID string) (reservation string, found bool, err error)
}

// recheck is how often a reserved node whose class no longer lists its
// reservation, but which still runs in it, is asked of EC2 again while its
// drift waits (budgets, PDBs): the reservation may end meanwhile. Karpenter
// asks every minute.
const recheck = time.Minute

// Register adds the controller to the manager. A class's reservations
// change in its status, not on its NodeClaims: each change of an
// EC2NodeClass looks again at its NodeClaims in reservations.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.reservation").For(&v1.NodeClaim{}).
		Watches(&awsv1.EC2NodeClass{}, handler.EnqueueRequestsFromMapFunc(c.ClaimsOf)).
		Complete(c)
}

// ClaimsOf are the NodeClaims of class that run in a reservation.
func (c *Controller) ClaimsOf(ctx context.Context, class client.Object) []reconcile.Request {
	var claims v1.NodeClaimList
	if err := c.Client.List(ctx, &claims, client.HasLabels{capacityreservation.LabelID}); err != nil {
		log.FromContext(ctx).Error(err, "listing the NodeClaims in reservations", "EC2NodeClass", map[string]string{"name": class.GetName()})
		return nil
	}
	var out []reconcile.Request
	for _, nc := range claims.Items {
		if ref := nc.Spec.NodeClassRef; ref != nil && ref.Kind == "EC2NodeClass" && ref.Name == class.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&nc)})
		}
	}
	return out
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.Client.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	id := nc.Labels[capacityreservation.LabelID]
	if id == "" || nc.DeletionTimestamp != nil || nc.Spec.NodeClassRef == nil || nc.Spec.NodeClassRef.Kind != "EC2NodeClass" {
		return reconcile.Result{}, nil
	}
	class := &awsv1.EC2NodeClass{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: nc.Spec.NodeClassRef.Name}, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var r *awsv1.CapacityReservation
	for i := range class.Status.CapacityReservations {
		if class.Status.CapacityReservations[i].ID == id {
			r = &class.Status.CapacityReservations[i]
		}
	}
	now := c.Clock.Now()
	if r != nil && r.ReservationType == "capacity-block" && r.EndTime != nil {
		// Drained when the block starts expiring, as Karpenter does: EC2
		// reclaims its instances from 30 minutes before the end.
		drainAt := r.EndTime.Add(-capacityreservation.ExpirationPeriod)
		if wait := drainAt.Sub(now); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		c.Recorder.Eventf(nc, corev1.EventTypeNormal, "CapacityReservationExpiring", "Capacity Block %s ends at %s; draining the node before EC2 reclaims it",
			id, r.EndTime.UTC().Format(time.RFC3339))
		if err := c.Client.Delete(ctx, nc); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		metrics.NodeClaimsDisrupted.WithLabelValues("capacity_reservation_expiring", nc.Labels[v1.LabelNodePool], nc.Labels[v1.LabelCapacityType]).Inc()
		log.FromContext(ctx).Info("disrupting nodeclaim(s) via delete, terminating 1 nodes", "NodeClaim", map[string]string{"name": nc.Name},
			"reason", "capacity reservation expiring", "capacity-reservation-id", id)
		return reconcile.Result{}, nil
	}
	if r != nil && (r.EndTime == nil || r.EndTime.After(now)) {
		// Still backing the node; look again when the class changes
		// (Register), or when it ends.
		if r.EndTime != nil {
			return reconcile.Result{RequeueAfter: r.EndTime.Sub(now)}, nil
		}
		return reconcile.Result{}, nil
	}
	if nc.Labels[v1.LabelCapacityType] != v1.CapacityTypeReserved || nc.Status.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	current, found, err := c.Instances.InstanceReservation(ctx, nc.Status.ProviderID)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case !found:
		return reconcile.Result{}, nil // garbage collection's, or not yet described
	case current == id:
		return reconcile.Result{RequeueAfter: recheck}, nil // drifted, not demoted
	}
	return reconcile.Result{}, c.demote(ctx, nc, id)
}

// reservationLabels are the labels a node in a reservation carries beside
// its capacity type, which an on-demand node does not.
var reservationLabels = []string{capacityreservation.LabelID, capacityreservation.LabelType, capacityreservation.LabelInterruptible}

// demote relabels a node whose reservation is gone: EC2 keeps it running as
// an on-demand instance, billed as one. The reservation's labels go, as
// Karpenter removes them.
func (c *Controller) demote(ctx context.Context, nc *v1.NodeClaim, id string) error {
	stored := nc.DeepCopy()
	nc.Labels[v1.LabelCapacityType] = v1.CapacityTypeOnDemand
	for _, l := range reservationLabels {
		delete(nc.Labels, l)
	}
	if err := c.Client.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return client.IgnoreNotFound(err)
	}
	if nc.Status.NodeName != "" {
		node := &corev1.Node{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err == nil && node.Labels[v1.LabelCapacityType] == v1.CapacityTypeReserved {
			storedNode := node.DeepCopy()
			node.Labels[v1.LabelCapacityType] = v1.CapacityTypeOnDemand
			for _, l := range reservationLabels {
				delete(node.Labels, l)
			}
			if err := c.Client.Patch(ctx, node, client.MergeFrom(storedNode)); err != nil {
				return client.IgnoreNotFound(err)
			}
		}
	}
	c.Recorder.Eventf(nc, corev1.EventTypeNormal, "CapacityReservationGone", "Capacity reservation %s no longer backs the node; it runs on demand", id)
	log.FromContext(ctx).Info("nodeclaim's capacity reservation is gone; it is on-demand now", "NodeClaim", map[string]string{"name": nc.Name}, "capacity-reservation-id", id)
	return nil
}
