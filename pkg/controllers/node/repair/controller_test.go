package repair_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/node/repair"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// member is a node of the pool with its NodeClaim; bad conditions are
// (type, status, how long ago it turned so).
type member struct {
	name string
	bad  []cond
	// deleting NodeClaims are being drained until deadline.
	deleting bool
	deadline string
}

type cond struct {
	t   corev1.NodeConditionType
	s   corev1.ConditionStatus
	ago time.Duration
}

func objects(pool string, members []member) []client.Object {
	out := []client.Object{&v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}}
	for _, m := range members {
		pid := "kwok://" + m.name
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: m.name, Labels: map[string]string{v1.LabelNodePool: pool, v1.LabelCapacityType: "on-demand"}},
			Spec:       corev1.NodeSpec{ProviderID: pid},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
			}},
		}
		for _, b := range m.bad {
			c := corev1.NodeCondition{Type: b.t, Status: b.s, LastTransitionTime: metav1.NewTime(now.Add(-b.ago))}
			if b.t == corev1.NodeReady {
				node.Status.Conditions[0] = c
			} else {
				node.Status.Conditions = append(node.Status.Conditions, c)
			}
		}
		nc := &v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "nc-" + m.name, Labels: map[string]string{v1.LabelNodePool: pool},
				Finalizers: []string{v1.TerminationFinalizer}},
			Status: v1.NodeClaimStatus{ProviderID: pid, NodeName: m.name, ImageID: "ami-1"},
		}
		if m.deadline != "" {
			nc.Annotations = map[string]string{v1.AnnotationNodeClaimTerminationTimestamp: m.deadline}
		}
		if m.deleting {
			ts := metav1.NewTime(now.Add(-time.Minute))
			nc.DeletionTimestamp = &ts
		}
		out = append(out, node, nc)
	}
	return out
}

func healthy(n int) []member {
	var out []member
	for i := 0; i < n; i++ {
		out = append(out, member{name: fmt.Sprintf("ok-%d", i)})
	}
	return out
}

func sick(n int, ago time.Duration) []member {
	var out []member
	for i := 0; i < n; i++ {
		out = append(out, member{name: fmt.Sprintf("sick-%d", i), bad: []cond{{corev1.NodeReady, corev1.ConditionFalse, ago}}})
	}
	return out
}

func TestRepair(t *testing.T) {
	cases := []struct {
		name    string
		members []member
		// target is the node reconciled.
		target string
		// repaired: its NodeClaim is deleted and stamped to terminate now.
		repaired bool
		requeue  time.Duration
		// blocked: NodeRepairBlocked events on the node, NodeClaim and pool.
		blocked bool
		// condition is the metric label of a repair.
		condition string
	}{
		{name: "NotReady past 30 minutes", members: sick(1, 31*time.Minute), target: "sick-0", repaired: true, condition: "ready"},
		{name: "Ready Unknown past 30 minutes", members: []member{{name: "lost", bad: []cond{{corev1.NodeReady, corev1.ConditionUnknown, 45 * time.Minute}}}},
			target: "lost", repaired: true, condition: "ready"},
		{name: "NotReady within the toleration waits for its end", members: sick(1, 29*time.Minute), target: "sick-0", requeue: time.Minute},
		{name: "a healthy node is left alone", members: healthy(3), target: "ok-1"},
		{name: "the condition due first decides", members: []member{{name: "gpu", bad: []cond{
			{corev1.NodeReady, corev1.ConditionFalse, 5 * time.Minute}, {"AcceleratedHardwareReady", corev1.ConditionFalse, 11 * time.Minute}}}},
			target: "gpu", repaired: true, condition: "accelerated_hardware_ready"},
		{name: "a True agent condition is healthy", members: []member{{name: "fine", bad: []cond{{"KernelReady", corev1.ConditionTrue, time.Hour}}}},
			target: "fine"},
		{name: "one unhealthy in three is within 20% rounded up", members: append(sick(1, time.Hour), healthy(2)...), target: "sick-0", repaired: true, condition: "ready"},
		{name: "two unhealthy in ten is 20%", members: append(sick(2, time.Hour), healthy(8)...), target: "sick-1", repaired: true, condition: "ready"},
		{name: "three unhealthy in ten blocks repair", members: append(sick(3, time.Hour), healthy(7)...), target: "sick-0", blocked: true, requeue: repair.BlockedRequeue},
		{name: "recently unhealthy nodes count against the share", members: append(append(sick(1, time.Hour), member{name: "new-0", bad: []cond{{corev1.NodeReady, corev1.ConditionFalse, time.Minute}}},
			member{name: "new-1", bad: []cond{{corev1.NodeReady, corev1.ConditionUnknown, time.Minute}}}), healthy(7)...), target: "sick-0", blocked: true, requeue: repair.BlockedRequeue},
		{name: "a NodeClaim stuck draining is forced", members: []member{{name: "stuck", bad: []cond{{corev1.NodeReady, corev1.ConditionFalse, time.Hour}},
			deleting: true, deadline: now.Add(24 * time.Hour).Format(time.RFC3339)}}, target: "stuck", repaired: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(objects("default", tc.members)...).
				WithIndex(&v1.NodeClaim{}, lifecycle.ProviderIDIndex, func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Status.ProviderID} }).
				Build()
			rec := record.NewFakeRecorder(10)
			c := &repair.Controller{Client: kube, Recorder: rec, Clock: clocktesting.NewFakeClock(now), Policies: repair.EKSPolicies}
			var before float64
			if tc.condition != "" {
				before = repaired(t, tc.condition)
			}
			res, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: tc.target}})
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.requeue)
			}
			nc := &v1.NodeClaim{}
			if err := kube.Get(context.Background(), types.NamespacedName{Name: "nc-" + tc.target}, nc); err != nil {
				t.Fatal(err)
			}
			stamp := nc.Annotations[v1.AnnotationNodeClaimTerminationTimestamp]
			switch {
			case tc.repaired && (nc.DeletionTimestamp == nil || stamp != now.Format(time.RFC3339)):
				t.Errorf("want the NodeClaim deleted and stamped %s; deleting=%v stamp=%q", now.Format(time.RFC3339), nc.DeletionTimestamp != nil, stamp)
			case !tc.repaired && nc.DeletionTimestamp != nil:
				t.Errorf("NodeClaim deleted")
			case !tc.repaired && stamp != "":
				t.Errorf("NodeClaim stamped %q", stamp)
			}
			var events []string
			for len(rec.Events) > 0 {
				events = append(events, <-rec.Events)
			}
			blocked := 0
			for _, e := range events {
				if strings.Contains(e, "NodeRepairBlocked") && strings.Contains(e, `nodepool "default" are unhealthy, more than the 20%`) {
					blocked++
				}
			}
			if tc.blocked && blocked != 3 {
				t.Errorf("want NodeRepairBlocked on the node, NodeClaim and NodePool, got %q", events)
			}
			if !tc.blocked && blocked > 0 {
				t.Errorf("unexpected %q", events)
			}
			if tc.condition != "" {
				if got := repaired(t, tc.condition) - before; got != 1 {
					t.Errorf("unhealthy_disrupted_total{condition=%q} rose by %v", tc.condition, got)
				}
			}
		})
	}
}

// repaired reads karpenter_nodeclaims_unhealthy_disrupted_total for a
// condition of pool default, as the metrics endpoint serves it.
func repaired(t *testing.T, condition string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"condition": condition, "nodepool": "default", "capacity_type": "on-demand", "image_id": "ami-1"}
	for _, mf := range families {
		if mf.GetName() != "karpenter_nodeclaims_unhealthy_disrupted_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := 0
			for _, l := range m.GetLabel() {
				if want[l.GetName()] == l.GetValue() {
					match++
				}
			}
			if match == len(want) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A node that is not Joiner's, or whose NodeClaim is gone, is never touched.
func TestRepairLeavesOtherNodes(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "managed-elsewhere"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}}}
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(node).
		WithIndex(&v1.NodeClaim{}, lifecycle.ProviderIDIndex, func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Status.ProviderID} }).
		Build()
	c := &repair.Controller{Client: kube, Recorder: record.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(now), Policies: repair.EKSPolicies}
	res, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: node.Name}})
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("%v %v", res, err)
	}
	if err := kube.Get(context.Background(), types.NamespacedName{Name: node.Name}, &corev1.Node{}); err != nil {
		t.Fatal(err)
	}
}
