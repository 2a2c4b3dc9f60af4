package nodeclass

import (
	"context"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// stampMetadata writes the hash annotations, which NodeClaims launched
// from the class carry and drift is judged by, and with finalize the
// termination finalizer, in one patch. The finalizer patch is guarded by
// the resource version: a merge patch replaces the whole finalizer list,
// and without the guard it could drop a finalizer someone else just added.
func stampMetadata(ctx context.Context, c client.Client, nc *awsv1.EC2NodeClass, finalize bool) error {
	hash := nc.Hash()
	needFinalizer := finalize && !controllerutil.ContainsFinalizer(nc, awsv1.TerminationFinalizer)
	if nc.Annotations[awsv1.AnnotationEC2NodeClassHash] == hash && nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] == awsv1.EC2NodeClassHashVersion && !needFinalizer {
		return nil
	}
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[awsv1.AnnotationEC2NodeClassHash] = hash
	nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	patch := client.MergeFrom(stored)
	if needFinalizer {
		controllerutil.AddFinalizer(nc, awsv1.TerminationFinalizer)
		patch = client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})
	}
	return c.Patch(ctx, nc, patch)
}

// setCondition sets one condition for the class's current generation;
// its transition time moves only when its status does.
func setCondition(nc *awsv1.EC2NodeClass, t string, status metav1.ConditionStatus, reason, message string, now time.Time) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message,
		ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(now)})
}

// setReady stores awsv1's readiness decision as the Ready condition.
func setReady(nc *awsv1.EC2NodeClass, now time.Time) {
	status, reason, message := nc.Readiness()
	setCondition(nc, awsv1.ConditionTypeReady, status, reason, message, now)
}

// patchStatus writes nc's status when it differs from stored's.
func patchStatus(ctx context.Context, c client.Client, stored, nc *awsv1.EC2NodeClass) error {
	if equality.Semantic.DeepEqual(stored.Status, nc.Status) {
		return nil
	}
	return c.Status().Patch(ctx, nc, client.MergeFrom(stored))
}
