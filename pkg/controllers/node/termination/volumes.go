package termination

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// awaitVolumes holds the instance until the drained pods' volumes are
// detached from the node. An instance terminated with a volume attached
// leaves the volume attached to nothing until the cloud notices (minutes,
// for EBS), and the pod that moved waits for it all that time. It does not
// wait for volumes that only pods which never leave use (they detach with
// the node), nor past the terminationGracePeriod deadline. wait reports that
// termination must not go on yet; res and err are then the result.
func (c *Controller) awaitVolumes(ctx context.Context, node *corev1.Node, nc *v1.NodeClaim, deadline *time.Time) (res reconcile.Result, wait bool, err error) {
	blocking, err := c.blockingVolumeAttachments(ctx, node)
	if err != nil {
		return reconcile.Result{}, true, err
	}
	now := c.Clock.Now()
	switch {
	case len(blocking) == 0:
		err = c.record(ctx, nc, v1.ConditionTypeVolumesDetached, metav1.ConditionTrue, "VolumesDetached", "")
	case deadline != nil && !now.Before(*deadline):
		err = c.record(ctx, nc, v1.ConditionTypeVolumesDetached, metav1.ConditionFalse, "TerminationGracePeriodElapsed", "TerminationGracePeriodElapsed")
	default:
		if err := c.record(ctx, nc, v1.ConditionTypeVolumesDetached, metav1.ConditionUnknown, "AwaitingVolumeDetachment", "AwaitingVolumeDetachment"); err != nil {
			res, err := lifecycle.Retry(err)
			return res, true, err
		}
		names := make([]string, len(blocking))
		for i, va := range blocking {
			names[i] = va.Name
		}
		c.Recorder.Event(node, corev1.EventTypeNormal, "AwaitingVolumeDetachment",
			fmt.Sprintf("Waiting for %d VolumeAttachment(s) to be deleted before terminating the instance: %s", len(blocking), strings.Join(names, ", ")))
		// The VolumeAttachment watch wakes us on a detach; the poll is for
		// the deadline.
		poll := volumePoll
		if deadline != nil && deadline.Sub(now) < poll {
			poll = deadline.Sub(now)
		}
		return reconcile.Result{RequeueAfter: poll}, true, nil
	}
	if err != nil {
		res, err := lifecycle.Retry(err)
		return res, true, err
	}
	return reconcile.Result{}, false, nil
}

// blockingVolumeAttachments are the node's VolumeAttachments that will be
// deleted once the drained pods' volumes detach. An attachment whose volume
// a pod that stays (a mirror pod, a pod tolerating the disrupted taint, a
// pod stuck terminating) still uses would never be, nor would an inline volume's,
// which names no PersistentVolume to tell whose it is; neither is waited for.
func (c *Controller) blockingVolumeAttachments(ctx context.Context, node *corev1.Node) ([]*storagev1.VolumeAttachment, error) {
	var attachments storagev1.VolumeAttachmentList
	if err := c.Client.List(ctx, &attachments, client.MatchingFields{NodeNameIndex: node.Name}); err != nil {
		return nil, err
	}
	if len(attachments.Items) == 0 {
		return nil, nil
	}
	var onNode corev1.PodList
	if err := c.Client.List(ctx, &onNode, client.MatchingFields{NodeNameIndex: node.Name}); err != nil {
		return nil, err
	}
	staying := sets.New[string]()
	for i := range onNode.Items {
		pod := &onNode.Items[i]
		if !staysWithNode(pod, c.Clock.Now()) {
			continue
		}
		for _, claim := range pods.ClaimNames(pod) {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := c.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: claim}, pvc); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			staying.Insert(pvc.Spec.VolumeName)
		}
	}
	var out []*storagev1.VolumeAttachment
	for i := range attachments.Items {
		va := &attachments.Items[i]
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && !staying.Has(*pv) {
			out = append(out, va)
		}
	}
	return out, nil
}
