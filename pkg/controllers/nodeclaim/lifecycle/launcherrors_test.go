package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// refusingCloud refuses every launch with err.
type refusingCloud struct {
	cloudprovider.CloudProvider
	err error
}

func (c *refusingCloud) Create(context.Context, *v1.NodeClaim) (*v1.NodeClaim, error) {
	return nil, c.err
}

// TestRefusedLaunches: a launch refused for capacity, or because the
// NodeClaim's class is missing or not Ready, deletes the NodeClaim (the
// provisioner plans again), as Karpenter's launch does; any other error
// keeps it, to be retried.
func TestRefusedLaunches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		deleted bool
		event   string
	}{
		{name: "insufficient capacity", err: &cloudprovider.InsufficientCapacityError{Err: errors.New("no m5.large in us-east-1a")}, deleted: true, event: "InsufficientCapacityError"},
		{name: "class not ready", err: &cloudprovider.NodeClassNotReadyError{Err: errors.New("EC2NodeClass default is not ready")}, deleted: true, event: "NodeClassNotReady"},
		{name: "class missing", err: &cloudprovider.NodeClassNotReadyError{Err: errors.New("EC2NodeClass default not found")}, deleted: true, event: "NodeClassNotReady"},
		{name: "another error", err: errors.New("RequestLimitExceeded"), deleted: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
			nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "refused", Labels: map[string]string{v1.LabelNodePool: "p"},
				Finalizers: []string{v1.TerminationFinalizer}, CreationTimestamp: metav1.NewTime(now)}}
			kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(nc).Build()
			rec := record.NewFakeRecorder(10)
			c := &lifecycle.Controller{Client: kube, Reader: kube, CloudProvider: &refusingCloud{err: tc.err}, Recorder: rec,
				Clock: clocktesting.NewFakeClock(now), LaunchTTL: time.Hour}
			_, _ = c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
			got := &v1.NodeClaim{}
			if err := kube.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err != nil {
				t.Fatal(err)
			}
			if deleted := got.DeletionTimestamp != nil; deleted != tc.deleted {
				t.Fatalf("NodeClaim deleted %v, want %v", deleted, tc.deleted)
			}
			close(rec.Events)
			var events []string
			for e := range rec.Events {
				events = append(events, e)
			}
			if tc.event != "" && (len(events) == 0 || !strings.Contains(events[0], tc.event)) {
				t.Errorf("events %v, want %s", events, tc.event)
			}
		})
	}
}
