package interruption

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// statuses answers DescribeInstanceStatus from a fixed list, or refuses it
// as EC2 does a role without the permission.
type statuses struct {
	list   []ec2types.InstanceStatus
	denied bool
	calls  int
}

func (s *statuses) DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	s.calls++
	if s.denied {
		return nil, &smithy.OperationError{ServiceID: "EC2", OperationName: "DescribeInstanceStatus", Err: &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}}
	}
	return &ec2.DescribeInstanceStatusOutput{InstanceStatuses: s.list}, nil
}

// pollNow is the fake clock's time in the poller's tests.
var pollNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// status is an instance's status; an impaired check's reachability detail
// failed three minutes before pollNow.
func status(id string, instance, system ec2types.SummaryStatus, events ...ec2types.InstanceStatusEvent) ec2types.InstanceStatus {
	return statusSince(id, instance, system, pollNow.Add(-3*time.Minute), events...)
}

func statusSince(id string, instance, system ec2types.SummaryStatus, since time.Time, events ...ec2types.InstanceStatusEvent) ec2types.InstanceStatus {
	sum := func(s ec2types.SummaryStatus) *ec2types.InstanceStatusSummary {
		out := &ec2types.InstanceStatusSummary{Status: s}
		if s == ec2types.SummaryStatusImpaired {
			out.Details = []ec2types.InstanceStatusDetails{{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypeFailed, ImpairedSince: &since}}
		}
		return out
	}
	return ec2types.InstanceStatus{InstanceId: aws.String(id), InstanceStatus: sum(instance), SystemStatus: sum(system), Events: events}
}

// node is a Node of pool "default", Ready or not.
func node(name string, ready bool) *corev1.Node {
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "default"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
}

func TestStatusPoller(t *testing.T) {
	ok, impaired := ec2types.SummaryStatusOk, ec2types.SummaryStatusImpaired
	retire := ec2types.InstanceStatusEvent{Code: ec2types.EventCodeInstanceRetirement, Description: aws.String("degraded hardware")}
	done := ec2types.InstanceStatusEvent{Code: ec2types.EventCodeSystemReboot, Description: aws.String("[Completed] reboot")}
	cases := []struct {
		name     string
		list     []ec2types.InstanceStatus
		nodes    int // nodes in the pool, a-0 … (a-0 is i-0's)
		notReady int
		// want is each NodeClaim's end: "kept", "drained" (deleted, no
		// deadline) or "forced" (deleted with its deadline now).
		want      map[string]string
		wantEvent string
		// wantEvents is how many events the two polls record.
		wantEvents int
		wantCount  map[string]float64
	}{
		{name: "healthy instances are left alone", list: []ec2types.InstanceStatus{status("i-0", ok, ok), status("i-1", ok, ok)}, nodes: 10,
			want: map[string]string{"a-0": "kept", "a-1": "kept"}},
		{name: "a check failed for 119 s is left to recover", list: []ec2types.InstanceStatus{statusSince("i-0", impaired, ok, pollNow.Add(-119*time.Second))}, nodes: 10,
			want: map[string]string{"a-0": "kept", "a-1": "kept"}},
		{name: "a check failed for 119 s beside a due event drains gracefully", list: []ec2types.InstanceStatus{statusSince("i-0", impaired, ok, pollNow.Add(-119*time.Second), retire)}, nodes: 10,
			want: map[string]string{"a-0": "drained", "a-1": "kept"}, wantEvent: "InstanceUnhealthy", wantEvents: 1, wantCount: map[string]float64{"event_status": 1}},
		{name: "a failed instance check terminates forcefully", list: []ec2types.InstanceStatus{status("i-0", impaired, ok)}, nodes: 10,
			want: map[string]string{"a-0": "forced", "a-1": "kept"}, wantEvent: "InstanceUnhealthy", wantEvents: 1, wantCount: map[string]float64{"instance_status": 1}},
		{name: "a failed system check with a retirement is forced once", list: []ec2types.InstanceStatus{status("i-1", ok, impaired, retire)}, nodes: 10,
			want: map[string]string{"a-0": "kept", "a-1": "forced"}, wantEvent: "InstanceUnhealthy", wantEvents: 1, wantCount: map[string]float64{"system_status": 1, "event_status": 1}},
		{name: "a scheduled event drains gracefully", list: []ec2types.InstanceStatus{status("i-0", ok, ok, retire)}, nodes: 10,
			want: map[string]string{"a-0": "drained", "a-1": "kept"}, wantEvent: "InstanceUnhealthy", wantEvents: 1, wantCount: map[string]float64{"event_status": 1}},
		{name: "a completed event is over", list: []ec2types.InstanceStatus{status("i-0", ok, ok, done)}, nodes: 10,
			want: map[string]string{"a-0": "kept", "a-1": "kept"}},
		{name: "an instance of no NodeClaim is ignored", list: []ec2types.InstanceStatus{status("i-9", impaired, impaired)}, nodes: 10,
			want: map[string]string{"a-0": "kept", "a-1": "kept"}},
		{name: "node repair's limit holds: two broken of five", list: []ec2types.InstanceStatus{status("i-0", impaired, ok), status("i-1", impaired, ok)}, nodes: 5,
			want: map[string]string{"a-0": "kept", "a-1": "kept"}, wantEvent: "NodeRepairBlocked", wantEvents: 4, wantCount: map[string]float64{"instance_status": 2}},
		{name: "NotReady nodes count against the limit", list: []ec2types.InstanceStatus{status("i-0", impaired, ok)}, nodes: 5, notReady: 1,
			want: map[string]string{"a-0": "kept", "a-1": "kept"}, wantEvent: "NodeRepairBlocked", wantEvents: 2, wantCount: map[string]float64{"instance_status": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			for i := range tc.nodes {
				objs = append(objs, node(fmt.Sprintf("a-%d-node", i), i < tc.nodes-tc.notReady))
			}
			for _, name := range []string{"a-0", "a-1"} {
				nc := claim(name, "i-"+name[2:], v1.CapacityTypeOnDemand)
				nc.Labels[v1.LabelNodePool] = "default"
				nc.Finalizers = []string{v1.TerminationFinalizer}
				objs = append(objs, nc)
			}
			kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).Build()
			rec := record.NewFakeRecorder(10)
			now := pollNow
			before := counts()
			p := &StatusPoller{Client: kube, EC2: &statuses{list: tc.list}, Recorder: rec, Clock: clocktesting.NewFakeClock(now)}
			// Twice: a second poll that sees the same findings neither
			// counts nor acts again.
			for range 2 {
				if err := p.Poll(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			for name, want := range tc.want {
				nc := &v1.NodeClaim{}
				if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, nc); err != nil {
					t.Fatal(err)
				}
				got := "kept"
				if nc.DeletionTimestamp != nil {
					got = "drained"
					if nc.Annotations[v1.AnnotationNodeClaimTerminationTimestamp] == now.Format(time.RFC3339) {
						got = "forced"
					}
				}
				if got != want {
					t.Errorf("NodeClaim %s %s, want %s", name, got, want)
				}
			}
			close(rec.Events)
			var events []string
			for e := range rec.Events {
				events = append(events, e)
			}
			if tc.wantEvent != "" && (len(events) == 0 || !strings.Contains(events[0], tc.wantEvent)) {
				t.Errorf("events %v, want %s", events, tc.wantEvent)
			}
			if len(events) != tc.wantEvents {
				t.Errorf("%d events %v, want %d", len(events), events, tc.wantEvents)
			}
			after := counts()
			for _, c := range []string{"instance_status", "system_status", "event_status"} {
				if d := after[c] - before[c]; d != tc.wantCount[c] {
					t.Errorf("instance_status_unhealthy_total{category=%q} rose by %v, want %v", c, d, tc.wantCount[c])
				}
			}
		})
	}
}

// Under a policy without ec2:DescribeInstanceStatus (Karpenter's v1.1.3
// stack), the refusal is logged once, naming the permission, and the
// poller keeps going; it says so again when the permission arrives.
func TestStatusPollerDenied(t *testing.T) {
	var logs bytes.Buffer
	ctx := logr.NewContext(context.Background(), funcr.New(func(prefix, args string) { logs.WriteString(args + "\n") }, funcr.Options{}))
	ec2api := &statuses{denied: true}
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).Build()
	p := &StatusPoller{Client: kube, EC2: ec2api, Recorder: record.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(time.Now())}
	for range 3 {
		if err := p.Poll(ctx); err == nil {
			t.Fatal("a refused poll returned no error")
		}
	}
	if n := strings.Count(logs.String(), "may not call ec2:DescribeInstanceStatus"); n != 1 {
		t.Errorf("the refusal was logged %d times in 3 polls, want once:\n%s", n, logs.String())
	}
	ec2api.denied = false
	if err := p.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "instance status checks are on") {
		t.Errorf("no log line when the permission arrived:\n%s", logs.String())
	}
}

func counts() map[string]float64 {
	out := map[string]float64{}
	for _, c := range []string{"instance_status", "system_status", "event_status"} {
		out[c] = testutil.ToFloat64(metrics.InstanceStatusUnhealthy.WithLabelValues(c))
	}
	return out
}

// The poller's memory holds what is unhealthy now: an instance that
// recovers is forgotten, and a second impairment counts again. A check not
// yet due is logged once, however many polls see it.
func TestStatusPollerForgetsRecovered(t *testing.T) {
	var logs bytes.Buffer
	ctx := logr.NewContext(context.Background(), funcr.New(func(prefix, args string) { logs.WriteString(args + "\n") }, funcr.Options{}))
	nc := claim("a-0", "i-0", v1.CapacityTypeOnDemand)
	nc.Labels[v1.LabelNodePool] = "default"
	// The finalizer keeps the drained NodeClaim (the fake client has no
	// termination controller), so every poll finds it.
	nc.Finalizers = []string{v1.TerminationFinalizer}
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(nc).Build()
	ec2api := &statuses{}
	clk := clocktesting.NewFakeClock(pollNow)
	p := &StatusPoller{Client: kube, EC2: ec2api, Recorder: record.NewFakeRecorder(100), Clock: clk}
	retire := ec2types.InstanceStatusEvent{Code: ec2types.EventCodeInstanceRetirement}
	young := statusSince("i-0", ec2types.SummaryStatusImpaired, ec2types.SummaryStatusOk, pollNow)
	before := counts()["event_status"]
	for i, list := range [][]ec2types.InstanceStatus{
		{status("i-0", ec2types.SummaryStatusOk, ec2types.SummaryStatusOk, retire)},
		{status("i-0", ec2types.SummaryStatusOk, ec2types.SummaryStatusOk, retire)},
		nil,
		{status("i-0", ec2types.SummaryStatusOk, ec2types.SummaryStatusOk, retire)},
		{young}, {young},
	} {
		ec2api.list = list
		if err := p.Poll(ctx); err != nil {
			t.Fatalf("poll %d: %v", i, err)
		}
	}
	if d := counts()["event_status"] - before; d != 2 {
		t.Errorf("two retirements with a recovery between counted %v times, want 2", d)
	}
	if len(p.seen) != 0 {
		t.Errorf("the poller remembers %v, which the last poll did not see", p.seen)
	}
	if n := strings.Count(logs.String(), "waiting for it to recover"); n != 1 {
		t.Errorf("a check not yet due was logged %d times in two polls, want once:\n%s", n, logs.String())
	}
}
