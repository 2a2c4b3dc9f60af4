package nodeoverlay

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/overlay"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// flakyCloud lists no instance types for the pools named in failing.
type flakyCloud struct {
	cloudprovider.CloudProvider
	failing map[string]bool
}

func (f flakyCloud) InstanceTypes(_ context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	if f.failing[np.Name] {
		return nil, errors.New("throttled")
	}
	return nil, nil
}

// A pool whose types cannot be listed waits, the others are evaluated, and
// the error is returned, so the next try comes with the rate limiter's
// backoff rather than after the resync.
func TestReconcile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failing map[string]bool
		wantErr bool
	}{
		{name: "every pool listed: evaluated, resynced later"},
		{name: "a pool not listed: the others evaluated, the error returned", failing: map[string]bool{"b": true}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtime.NewScheme()
			_ = v1.AddToScheme(s)
			_ = v1alpha1.AddToScheme(s)
			no := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "cheaper"}}
			kube := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1alpha1.NodeOverlay{}).
				WithObjects(no, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "b"}}).Build()
			store := &overlay.Store{}
			c := &Controller{Client: kube, CloudProvider: flakyCloud{failing: tc.failing}, Store: store,
				Clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
			res, err := c.Reconcile(context.Background(), reconcile.Request{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if !tc.wantErr && res.RequeueAfter != 5*time.Minute {
				t.Errorf("requeue after %s, want the 5-minute resync", res.RequeueAfter)
			}
			if _, err := store.ApplyTo(overlay.Pool{Name: "a"}, nil); err != nil {
				t.Errorf("pool a: %v", err)
			}
			_, errB := store.ApplyTo(overlay.Pool{Name: "b"}, nil)
			var awaiting *overlay.AwaitingEvaluationError
			if errors.As(errB, &awaiting) != tc.failing["b"] {
				t.Errorf("pool b: %v", errB)
			}
			var got v1alpha1.NodeOverlay
			if err := kube.Get(context.Background(), client.ObjectKeyFromObject(no), &got); err != nil {
				t.Fatal(err)
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, ConditionReady) {
				t.Errorf("overlay not Ready: %v", got.Status.Conditions)
			}
		})
	}
}
