package reservation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/reservation"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
)

func TestReconcile(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	tests := []struct {
		name        string
		reservation *awsv1.CapacityReservation // in the class's status; nil: gone
		deleted     bool
		capacity    string // the NodeClaim's and Node's capacity type after
		requeue     time.Duration
		event       string
		// inEC2 is the reservation EC2 says the instance runs in now;
		// unknown: EC2 does not know the instance.
		inEC2   string
		unknown bool
	}{
		{name: "a Capacity Block ending within 40 minutes is drained", reservation: &awsv1.CapacityReservation{ID: "cr-1", ReservationType: "capacity-block", EndTime: at(39 * time.Minute)},
			deleted: true, capacity: "reserved", event: "CapacityReservationExpiring"},
		{name: "a Capacity Block ending in 40 minutes is drained: EC2 reclaims from 30", reservation: &awsv1.CapacityReservation{ID: "cr-1", ReservationType: "capacity-block", EndTime: at(40 * time.Minute)},
			deleted: true, capacity: "reserved", event: "CapacityReservationExpiring"},
		{name: "a Capacity Block ending later waits for the 40 minutes", reservation: &awsv1.CapacityReservation{ID: "cr-1", ReservationType: "capacity-block", EndTime: at(time.Hour)},
			capacity: "reserved", requeue: 20 * time.Minute},
		{name: "a reservation still there", reservation: &awsv1.CapacityReservation{ID: "cr-1", ReservationType: "default"}, capacity: "reserved"},
		{name: "a reservation EC2 let the instance go from makes the node on-demand", capacity: "on-demand", event: "CapacityReservationGone"},
		{name: "a reservation the class no longer lists, the instance still in it: drifted, not relabelled", inEC2: "cr-1", capacity: "reserved", requeue: time.Minute},
		{name: "an instance EC2 does not know changes nothing", unknown: true, capacity: "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
			class.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionTypeCapacityReservationsReady, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: metav1.Now()}}
			if tt.reservation != nil {
				class.Status.CapacityReservations = []awsv1.CapacityReservation{*tt.reservation}
			}
			labels := map[string]string{v1.LabelCapacityType: "reserved", "karpenter.k8s.aws/capacity-reservation-id": "cr-1", v1.LabelNodePool: "default"}
			nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x", Labels: labels},
				Spec:   v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}},
				Status: v1.NodeClaimStatus{NodeName: "node-x", ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-x", Labels: map[string]string{v1.LabelCapacityType: "reserved"}}}
			kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(class, nc, node).Build()
			rec := record.NewFakeRecorder(10)
			c := &reservation.Controller{Client: kube, Recorder: rec, Clock: clocktesting.NewFakeClock(now), Instances: ec2View{tt.inEC2, !tt.unknown}}
			res, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: nc.Name}})
			if err != nil {
				t.Fatal(err)
			}
			got := &v1.NodeClaim{}
			err = kube.Get(context.Background(), client.ObjectKey{Name: nc.Name}, got)
			if gone := apierrors.IsNotFound(err); gone != tt.deleted {
				t.Fatalf("deleted %v, want %v (%v)", gone, tt.deleted, err)
			}
			if !tt.deleted && got.Labels[v1.LabelCapacityType] != tt.capacity {
				t.Errorf("NodeClaim capacity type %q, want %q", got.Labels[v1.LabelCapacityType], tt.capacity)
			}
			if _, ok := got.Labels["karpenter.k8s.aws/capacity-reservation-id"]; !tt.deleted && ok != (tt.capacity == "reserved") {
				t.Errorf("NodeClaim reservation id label present %v with capacity type %s", ok, tt.capacity)
			}
			gotNode := &corev1.Node{}
			_ = kube.Get(context.Background(), client.ObjectKey{Name: "node-x"}, gotNode)
			if gotNode.Labels[v1.LabelCapacityType] != tt.capacity {
				t.Errorf("Node capacity type %q, want %q", gotNode.Labels[v1.LabelCapacityType], tt.capacity)
			}
			if res.RequeueAfter != tt.requeue {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, tt.requeue)
			}
			select {
			case e := <-rec.Events:
				if tt.event == "" || !strings.Contains(e, tt.event) {
					t.Errorf("event %q, want %q", e, tt.event)
				}
			default:
				if tt.event != "" {
					t.Errorf("no event, want %s", tt.event)
				}
			}
		})
	}
}

// ec2View is what EC2 says of the instance's reservation.
type ec2View struct {
	reservation string
	found       bool
}

func (v ec2View) InstanceReservation(context.Context, string) (string, bool, error) {
	return v.reservation, v.found, nil
}

// A change of a class looks again at its NodeClaims in reservations, and
// only those: a reservation cancelled shows in the class's status alone.
func TestClaimsOf(t *testing.T) {
	ref := func(class string) *v1.NodeClassReference {
		return &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}
	}
	reserved := map[string]string{"karpenter.k8s.aws/capacity-reservation-id": "cr-1"}
	objs := []client.Object{
		&v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "in-reservation", Labels: reserved}, Spec: v1.NodeClaimSpec{NodeClassRef: ref("default")}},
		&v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "on-demand"}, Spec: v1.NodeClaimSpec{NodeClassRef: ref("default")}},
		&v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "other-class", Labels: reserved}, Spec: v1.NodeClaimSpec{NodeClassRef: ref("gpu")}},
	}
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(objs...).Build()
	c := &reservation.Controller{Client: kube}
	got := c.ClaimsOf(context.Background(), &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	if len(got) != 1 || got[0].Name != "in-reservation" {
		t.Fatalf("requests %v, want in-reservation alone", got)
	}
}
