package garbagecollection

import (
	"context"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A registered NodeClaim whose instance the cloud no longer lists is
// deleted, as Karpenter's garbage collection deletes it, unless its Node
// is still Ready; an unregistered one is left to the registration timeout.
func TestCollectClaims(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	const id = "aws:///us-east-1a/i-1"
	claim := func(registered bool) *v1.NodeClaim {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{v1.LabelNodePool: "default"}},
			Status: v1.NodeClaimStatus{ProviderID: id, NodeName: "node-a"}}
		if registered {
			nc.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.NewTime(now)}}
		}
		return nc
	}
	node := func(ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: corev1.NodeSpec{ProviderID: id},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	instance := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}, Status: v1.NodeClaimStatus{ProviderID: id}}
	deleting := instance.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	terminating := claim(true)
	terminating.Finalizers = []string{v1.TerminationFinalizer}
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	for _, tc := range []struct {
		name      string
		claim     *v1.NodeClaim
		node      *corev1.Node
		instances []*v1.NodeClaim
		collected bool
	}{
		{name: "registered, instance gone, no Node", claim: claim(true), collected: true},
		{name: "registered, instance listed", claim: claim(true), instances: []*v1.NodeClaim{instance}},
		{name: "registered, instance gone, Node still Ready", claim: claim(true), node: node(corev1.ConditionTrue)},
		{name: "registered, instance gone, Node not Ready", claim: claim(true), node: node(corev1.ConditionUnknown), collected: true},
		{name: "registered, instance being deleted", claim: claim(true), instances: []*v1.NodeClaim{deleting}, collected: true},
		{name: "not registered, instance gone", claim: claim(false)},
		{name: "already being deleted", claim: terminating},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			if err := v1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.claim)
			if tc.node != nil {
				b = b.WithObjects(tc.node)
			}
			kube := b.Build()
			c := &Controller{Cluster: &state.Cluster{Client: kube}, Client: kube, CloudProvider: &cloud{instances: tc.instances},
				Clock: clocktesting.NewFakeClock(now), MinAge: 30 * time.Second}
			counted := metrics.NodeClaimsDisrupted.WithLabelValues("garbage_collected", "default", "")
			before := testutil.ToFloat64(counted)
			if err := c.collect(context.Background()); err != nil {
				t.Fatal(err)
			}
			err := kube.Get(context.Background(), client.ObjectKeyFromObject(tc.claim), &v1.NodeClaim{})
			if got := apierrors.IsNotFound(err); got != tc.collected {
				t.Fatalf("NodeClaim deleted %t (%v), want %t", got, err, tc.collected)
			}
			want := 0.0
			if tc.collected {
				want = 1
			}
			if got := testutil.ToFloat64(counted) - before; got != want {
				t.Fatalf("karpenter_nodeclaims_disrupted_total{reason=\"garbage_collected\"} rose by %v, want %v", got, want)
			}
		})
	}
}
