package interruption

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// queue is an in-memory SQS queue.
type queue struct {
	mu       sync.Mutex
	messages []sqstypes.Message
	deleted  []string
	missing  bool
	// denied answers GetQueueUrl as SQS does to a role without the
	// permission.
	denied bool
}

func (q *queue) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	if q.missing {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	if q.denied {
		return nil, &smithy.OperationError{ServiceID: "SQS", OperationName: "GetQueueUrl", Err: &smithy.GenericAPIError{Code: "AccessDenied",
			Message: "User: arn:aws:sts::123456789012:assumed-role/demo-karpenter/s is not authorized to perform: sqs:GetQueueUrl on resource: arn:aws:sqs:us-east-1:123456789012:demo"}}
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs/" + aws.ToString(in.QueueName))}, nil
}

func (q *queue) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.messages
	q.messages = nil
	return &sqs.ReceiveMessageOutput{Messages: out}, nil
}

func (q *queue) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleted = append(q.deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

type marks struct {
	mu  sync.Mutex
	got []string
}

func (m *marks) MarkUnavailable(instanceType, zone, capacityType, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, strings.Join([]string{instanceType, zone, capacityType, reason}, "/"))
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func claim(name, instance, capacityType string) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			v1.LabelCapacityType: capacityType, corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a"}},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + instance, NodeName: name + "-node"},
	}
}

func event(detailType, instance, extra string) string {
	return fmt.Sprintf(`{"source":"aws.ec2","detail-type":%q,"time":"2026-11-23T10:00:00Z","detail":{"instance-id":%q%s}}`, detailType, instance, extra)
}

func TestMessages(t *testing.T) {
	cases := []struct {
		name        string
		body        string
		wantDeleted []string // NodeClaims deleted
		wantMarks   []string
		wantEvent   string
	}{
		{name: "a spot interruption drains the node and takes its offering out",
			body: event("EC2 Spot Instance Interruption Warning", "i-spot", ""), wantDeleted: []string{"spot"},
			wantMarks: []string{"m5.large/us-east-1a/spot/SpotInterruption"}, wantEvent: "SpotInterrupted"},
		{name: "a rebalance recommendation only warns",
			body: event("EC2 Instance Rebalance Recommendation", "i-spot", ""), wantEvent: "SpotRebalanceRecommendation"},
		{name: "a stopping on-demand instance drains without touching offerings",
			body: event("EC2 Instance State-change Notification", "i-od", `,"state":"stopping"`), wantDeleted: []string{"od"}, wantEvent: "InstanceStopping"},
		{name: "scheduled maintenance drains",
			body:        `{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-od"}]}}`,
			wantDeleted: []string{"od"}, wantEvent: "InstanceUnhealthy"},
		{name: "a capacity reservation interruption drains",
			body: event("EC2 Capacity Reservation Instance Interruption Warning", "i-od", `,"instance-action":"terminate"`), wantDeleted: []string{"od"}, wantEvent: "CapacityReservationInterrupted"},
		{name: "an instance of no NodeClaim is ignored", body: event("EC2 Spot Instance Interruption Warning", "i-other", "")},
		{name: "an unreadable message is dropped", body: "not json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(claim("spot", "i-spot", v1.CapacityTypeSpot), claim("od", "i-od", v1.CapacityTypeOnDemand)).Build()
			q := &queue{messages: []sqstypes.Message{{Body: aws.String(tc.body), ReceiptHandle: aws.String("r1"), MessageId: aws.String("m1")}}}
			m := &marks{}
			rec := record.NewFakeRecorder(10)
			c := &Controller{Client: kube, SQS: q, Queue: "demo", Unavailable: m, Recorder: rec, Clock: clocktesting.NewFakeClock(metav1.Now().Time)}
			if _, err := c.QueueURL(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := c.Poll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(q.deleted) != 1 {
				t.Fatalf("message deleted %d times, want once", len(q.deleted))
			}
			for _, name := range []string{"spot", "od"} {
				err := kube.Get(context.Background(), client.ObjectKey{Name: name}, &v1.NodeClaim{})
				gone := apierrors.IsNotFound(err)
				want := false
				for _, d := range tc.wantDeleted {
					want = want || d == name
				}
				if gone != want {
					t.Errorf("NodeClaim %s deleted %v, want %v", name, gone, want)
				}
			}
			if fmt.Sprint(m.got) != fmt.Sprint(tc.wantMarks) {
				t.Errorf("marked %v, want %v", m.got, tc.wantMarks)
			}
			close(rec.Events)
			var events []string
			for e := range rec.Events {
				events = append(events, e)
			}
			if tc.wantEvent != "" && (len(events) == 0 || !strings.Contains(events[0], tc.wantEvent)) {
				t.Errorf("events %v, want %s", events, tc.wantEvent)
			}
			if tc.wantEvent == "" && len(events) > 0 {
				t.Errorf("events %v, want none", events)
			}
		})
	}
}

// A queue the role may not read stops Joiner at start naming the
// permission, as every refused AWS call does.
func TestDeniedQueueNamesThePermission(t *testing.T) {
	c := &Controller{SQS: &queue{denied: true}, Queue: "demo"}
	_, err := c.QueueURL(context.Background())
	if err == nil || !strings.Contains(err.Error(), "allow sqs:GetQueueUrl in the IAM policy") {
		t.Fatalf("error %v", err)
	}
}

func TestMissingQueueNamesTheSetting(t *testing.T) {
	c := &Controller{SQS: &queue{missing: true}, Queue: "typo"}
	_, err := c.QueueURL(context.Background())
	if err == nil || !strings.Contains(err.Error(), "INTERRUPTION_QUEUE") || !strings.Contains(err.Error(), "no such SQS queue") {
		t.Fatalf("error %v", err)
	}
}
