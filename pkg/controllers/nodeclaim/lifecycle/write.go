package lifecycle

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ConflictRetry is how soon a write that lost a race is tried again, from a
// fresh read. The winner's watch event usually brings the object back
// sooner; this is the floor.
const ConflictRetry = time.Second

// PatchStatus writes the changes made to obj's status since stored. The
// patch carries stored's resourceVersion, so it fails with a Conflict when
// anyone wrote the object in between. A JSON merge patch replaces a whole
// list, and NodeClaim conditions are a list that several controllers write:
// without the check, a controller patching from a stale copy would erase
// the condition another had just set.
//
// Nothing is sent when nothing changed: the lock puts the resourceVersion
// in every patch, so an empty one still costs the API server a write, and
// a NodeClaim waiting for its node rechecks every 5 s (1,700 of them sent
// over a hundred such writes a second).
func PatchStatus(ctx context.Context, c client.Client, obj, stored client.Object) error {
	if reflect.DeepEqual(obj, stored) {
		return nil
	}
	return c.Status().Patch(ctx, obj, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
}

// Patch is PatchStatus for the object itself: finalizers and taints are
// lists too.
func Patch(ctx context.Context, c client.Client, obj, stored client.Object) error {
	if reflect.DeepEqual(obj, stored) {
		return nil
	}
	return c.Patch(ctx, obj, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
}

// Races remembers the objects whose last write lost a race (a Conflict),
// so that the pass retrying it reads them from the API server. A retry read
// from the cache loses again for as long as the cache is behind: at 1,100
// launches it fell seconds behind, and 1,659 NodeClaims took 16,000
// conflicting status patches, one a second each, on the same request budget
// as the provisioner's creates (docs/benchmarks.md §7, run 4). The zero
// value is ready to use.
type Races struct {
	mu   sync.Mutex
	lost map[string]bool
}

// Retry is the package Retry that also remembers a conflict on obj.
func (r *Races) Retry(obj client.Object, err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		r.mu.Lock()
		if r.lost == nil {
			r.lost = map[string]bool{}
		}
		r.lost[raceKey(obj)] = true
		r.mu.Unlock()
	}
	return Retry(err)
}

// Fresh reads obj, just read from the cache, again from live when its last
// write lost a race. The mark goes with the read: the write that follows it
// carries the API server's own resourceVersion.
func (r *Races) Fresh(ctx context.Context, live client.Reader, obj client.Object) error {
	if !r.Lost(obj) {
		return nil
	}
	return live.Get(ctx, client.ObjectKeyFromObject(obj), obj)
}

// Lost reports, once, whether obj's last write lost a race, for a caller
// that reads it around the cache its own way.
func (r *Races) Lost(obj client.Object) bool {
	key := raceKey(obj)
	r.mu.Lock()
	defer r.mu.Unlock()
	lost := r.lost[key]
	delete(r.lost, key)
	return lost
}

func raceKey(obj client.Object) string {
	return fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
}

// Retry is the reconcile result of a Patch or PatchStatus that failed: a
// conflict is retried (from a fresh read, with Races), an object that is
// gone needs nothing more, and other errors are returned.
func Retry(err error) (reconcile.Result, error) {
	switch {
	case apierrors.IsConflict(err):
		return reconcile.Result{RequeueAfter: ConflictRetry}, nil
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	default:
		return reconcile.Result{}, err
	}
}

// InstancePoll is how often a terminating instance is checked on.
const InstancePoll = 5 * time.Second

// TerminateInstance asks the cloud to delete the instance behind nc and
// reports whether it is gone. The cloud says so (NodeClaimNotFound) only
// once the instance no longer exists, and both finalizers hold until then,
// so a finalizer never lets go of a machine that still runs.
func TerminateInstance(ctx context.Context, cloud cloudprovider.CloudProvider, nc *v1.NodeClaim) (gone bool, err error) {
	switch err := cloud.Delete(ctx, nc); {
	case cloudprovider.IsNodeClaimNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("terminating instance: %w", err)
	}
	return false, nil
}

// TerminationFailed reports a failed TerminateInstance on obj (the
// NodeClaim, or the Node whose NodeClaim is gone) and says when to retry.
// The finalizer stays, so the instance is not leaked; the person who can
// fix the cause (a refused permission, which err names) reads the
// object's events and the log. The retry keeps a steady pace rather than
// the workqueue's backoff, which grows to minutes: it ends soon after the
// fix.
func TerminationFailed(ctx context.Context, rec record.EventRecorder, obj client.Object, providerID string, err error) reconcile.Result {
	log.FromContext(ctx).Error(err, "terminating the nodeclaim's instance", "provider-id", providerID)
	if rec != nil {
		rec.Event(obj, corev1.EventTypeWarning, "TerminationFailed", truncate(err.Error(), 300))
	}
	return reconcile.Result{RequeueAfter: InstancePoll}
}
