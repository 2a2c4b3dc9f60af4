package tagging_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/tagging"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	claimName  = "default-abc"
	providerID = "aws:///us-west-2a/i-0123456789abcdef0"
)

// fakeTagger records which NodeClaims it was asked to tag and answers err.
type fakeTagger struct {
	err    error
	tagged []string
}

func (f *fakeTagger) TagNodeClaim(_ context.Context, nc *v1.NodeClaim) error {
	f.tagged = append(f.tagged, nc.Name)
	return f.err
}

type claimOption func(*v1.NodeClaim)

func newClaim(opts ...claimOption) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName, Labels: map[string]string{v1.LabelNodePool: "default"}}}
	nc.Status.ProviderID = providerID
	for _, o := range opts {
		o(nc)
	}
	return nc
}

func unlaunched(nc *v1.NodeClaim) { nc.Status.ProviderID = "" }
func marked(nc *v1.NodeClaim) {
	nc.Annotations = map[string]string{awsv1.AnnotationInstanceTagged: "true"}
}

// deleting gives the claim a finalizer so the fake API server keeps it
// after the delete that sets its deletion timestamp.
func deleting(nc *v1.NodeClaim) {
	nc.Finalizers = []string{v1.TerminationFinalizer}
	nc.DeletionTimestamp = &metav1.Time{Time: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
}

func conflict() error {
	return apierrors.NewConflict(schema.GroupResource{Group: v1.Group, Resource: "nodeclaims"}, claimName, errors.New("the object has been modified"))
}

// TestReconcile runs one reconcile of the tagging controller per row and
// checks what it asked the cloud, the mark it left, the event and the retry.
func TestReconcile(t *testing.T) {
	denied := errors.New("tagging instance i-0123456789abcdef0: UnauthorizedOperation: allow ec2:CreateTags")
	for _, tc := range []struct {
		name       string
		claim      *v1.NodeClaim // nil: the NodeClaim is gone
		tagErr     error
		patchErr   error // answered by the API server instead of applying the patch
		wantTagged bool  // the Tagger was called
		wantMark   bool
		wantResult reconcile.Result
		wantErr    bool
		wantEvent  string // substring of the one event expected; "" for none
	}{
		{name: "no provider ID yet: nothing to tag", claim: newClaim(unlaunched)},
		{name: "deleting: the instance is on its way out", claim: newClaim(deleting)},
		{name: "already marked: tagged at launch", claim: newClaim(marked), wantMark: true},
		{name: "tags and marks", claim: newClaim(), wantTagged: true, wantMark: true},
		{name: "tagger refused: event names the error, retried at the steady pace, not marked",
			claim: newClaim(), tagErr: denied, wantTagged: true,
			wantResult: reconcile.Result{RequeueAfter: tagging.Retry}, wantEvent: "Warning TaggingFailed " + denied.Error()},
		{name: "conflict on the mark: retried from a fresh read",
			claim: newClaim(), patchErr: conflict(), wantTagged: true,
			wantResult: reconcile.Result{RequeueAfter: lifecycle.ConflictRetry}},
		{name: "other error on the mark: returned for the workqueue's backoff",
			claim: newClaim(), patchErr: apierrors.NewServiceUnavailable("etcd leader changed"), wantTagged: true, wantErr: true},
		{name: "gone between tag and mark: nothing more to do",
			claim: newClaim(), patchErr: apierrors.NewNotFound(schema.GroupResource{Group: v1.Group, Resource: "nodeclaims"}, claimName), wantTagged: true},
		{name: "NodeClaim gone: nothing to do"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{})
			if tc.claim != nil {
				b = b.WithObjects(tc.claim)
			}
			kube := interceptor.NewClient(b.Build(), interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if tc.patchErr != nil {
						return tc.patchErr
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
			})
			tagger := &fakeTagger{err: tc.tagErr}
			events := record.NewFakeRecorder(10)
			c := &tagging.Controller{Client: kube, Tagger: tagger, Recorder: events}

			res, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: claimName}})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error %v, want error %t", err, tc.wantErr)
			}
			if res != tc.wantResult {
				t.Errorf("Reconcile result %+v, want %+v", res, tc.wantResult)
			}
			if got := len(tagger.tagged) > 0; got != tc.wantTagged {
				t.Errorf("Tagger called %v, want called %t", tagger.tagged, tc.wantTagged)
			}
			if tc.claim != nil {
				nc := &v1.NodeClaim{}
				if err := kube.Get(context.Background(), types.NamespacedName{Name: claimName}, nc); err != nil {
					t.Fatal(err)
				}
				if got := nc.Annotations[awsv1.AnnotationInstanceTagged] == "true"; got != tc.wantMark {
					t.Errorf("annotation %s marked %t, want %t (annotations %v)", awsv1.AnnotationInstanceTagged, got, tc.wantMark, nc.Annotations)
				}
			}
			var got []string
			for len(events.Events) > 0 {
				got = append(got, <-events.Events)
			}
			switch {
			case tc.wantEvent == "" && len(got) > 0:
				t.Errorf("events %v, want none", got)
			case tc.wantEvent != "" && (len(got) != 1 || !strings.Contains(got[0], tc.wantEvent)):
				t.Errorf("events %v, want one containing %q", got, tc.wantEvent)
			}
		})
	}
}

// TestRetryUntilTagged is the controller's loop as the workqueue drives it:
// refused until the permission is granted, then tagged and marked, and
// then left alone.
func TestRetryUntilTagged(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(newClaim()).Build()
	tagger := &fakeTagger{err: errors.New("UnauthorizedOperation: allow ec2:CreateTags")}
	c := &tagging.Controller{Client: kube, Tagger: tagger, Recorder: record.NewFakeRecorder(10)}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: claimName}}
	var results []reconcile.Result
	for range 4 {
		if len(tagger.tagged) == 2 {
			tagger.err = nil // the permission is granted
		}
		res, err := c.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	want := []reconcile.Result{{RequeueAfter: tagging.Retry}, {RequeueAfter: tagging.Retry}, {}, {}}
	if !slices.Equal(results, want) {
		t.Errorf("results %+v, want %+v", results, want)
	}
	if len(tagger.tagged) != 3 {
		t.Errorf("Tagger called %d times, want 3: twice refused, once granted, never after the mark", len(tagger.tagged))
	}
}
