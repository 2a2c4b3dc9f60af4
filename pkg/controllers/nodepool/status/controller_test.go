package status_test

import (
	"context"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodepool/status"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A NodePool with spec.replicas is never silently a dynamic pool: its
// status says it launches nothing, naming spec.replicas and the fix. Nor is
// one whose requirement values are not label values, which the CRD accepts
// as Karpenter's does.
func TestNodePoolValidationStatus(t *testing.T) {
	three := int64(3)
	cases := []struct {
		name      string
		replicas  *int64
		reqs      []v1.NodeSelectorRequirementWithMinValues
		spendCap  string
		valid     bool
		wantInMsg []string
	}{
		{name: "dynamic NodePool is valid", valid: true},
		{name: "static NodePool says why it launches nothing", replicas: &three, wantInMsg: []string{"spec.replicas is set (3)", "StaticCapacity", "recreate it without spec.replicas"}},
		{name: "label values are valid", valid: true, reqs: []v1.NodeSelectorRequirementWithMinValues{{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b-c.d_e"}}}},
		{name: "a value with a space is named", reqs: []v1.NodeSelectorRequirementWithMinValues{
			{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
			{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"ok", "a b"}}},
			wantInMsg: []string{`spec.template.spec.requirements[1].values[1]: "a b" (key "zone") is not a label value`, "alphanumeric"}},
		{name: "a value of 64 characters is named", reqs: []v1.NodeSelectorRequirementWithMinValues{{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{strings.Repeat("a", 64)}}},
			wantInMsg: []string{"spec.template.spec.requirements[0].values[0]", "must be no more than 63 bytes"}},
		{name: "a spend cap in dollars is valid", spendCap: "2.50", valid: true},
		{name: "a spend cap that is not a price is named", spendCap: "2,50",
			wantInMsg: []string{`metadata.annotations[joiner.sh/hourly-spend-cap]: "2,50" is not a cost in US dollars per hour`, "remove the annotation"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Generation: 1}, Spec: v1.NodePoolSpec{Replicas: tc.replicas,
				Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{Requirements: tc.reqs,
					NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}}}}}
			if tc.spendCap != "" {
				np.Annotations = map[string]string{"joiner.sh/hourly-spend-cap": tc.spendCap}
			}
			kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(np).WithStatusSubresource(&v1.NodePool{}).Build()
			got := reconciled(t, kube)
			cond := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeValidationSucceeded)
			if cond == nil {
				t.Fatal("no ValidationSucceeded condition")
			}
			if (cond.Status == metav1.ConditionTrue) != tc.valid {
				t.Fatalf("ValidationSucceeded=%s %q", cond.Status, cond.Message)
			}
			for _, want := range tc.wantInMsg {
				if !strings.Contains(cond.Message, want) {
					t.Errorf("message %q lacks %q", cond.Message, want)
				}
			}
			if !tc.valid && meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeReady) {
				t.Error("an invalid NodePool is Ready")
			}
		})
	}
}

// NodeClassReady follows the class's readiness as awsv1 decides it, not
// just its Ready condition: a spec change not yet resolved, a dependent
// that is False, or a class being deleted all make it False.
func TestNodeClassReadiness(t *testing.T) {
	deps := func(gen int64, status metav1.ConditionStatus) []metav1.Condition {
		out := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now(), ObservedGeneration: gen}}
		for _, d := range awsv1.ReadyDependents {
			out = append(out, metav1.Condition{Type: d, Status: metav1.ConditionTrue, Reason: d, LastTransitionTime: metav1.Now(), ObservedGeneration: gen})
		}
		out[len(out)-1].Status = status
		return out
	}
	cases := []struct {
		name       string
		generation int64
		conds      []metav1.Condition
		deleting   bool
		ready      bool
		reason     string
		message    string
	}{
		{name: "every dependent true", generation: 1, conds: deps(1, metav1.ConditionTrue), ready: true},
		{name: "a dependent false", generation: 1, conds: deps(1, metav1.ConditionFalse), reason: "NodeClassNotReady", message: "CapacityReservationsReady=False"},
		{name: "spec changed since", generation: 2, conds: deps(1, metav1.ConditionTrue), reason: "NodeClassNotReady", message: "AMIsReady=Unknown"},
		{name: "being deleted", generation: 1, conds: deps(1, metav1.ConditionTrue), deleting: true, reason: "NodeClassTerminating", message: "is terminating"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Generation: 1}, Spec: v1.NodePoolSpec{
				Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}}}}}
			class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: tc.generation}}
			if tc.deleting {
				class.Finalizers = []string{awsv1.TerminationFinalizer}
			}
			class.Status.Conditions = tc.conds
			kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(np, class).WithStatusSubresource(&v1.NodePool{}, &awsv1.EC2NodeClass{}).Build()
			if tc.deleting {
				if err := kube.Delete(context.Background(), class); err != nil {
					t.Fatal(err)
				}
			}
			got := reconciled(t, kube)
			cond := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeNodeClassReady)
			if cond == nil || (cond.Status == metav1.ConditionTrue) != tc.ready {
				t.Fatalf("NodeClassReady %+v, want ready=%v", cond, tc.ready)
			}
			if !tc.ready && (cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.message)) {
				t.Errorf("NodeClassReady %s %q, want %s with %q", cond.Reason, cond.Message, tc.reason, tc.message)
			}
		})
	}
}

// TestNodePoolResources: status.resources is the sum of the capacity of
// the pool's NodeClaims, extended resources included, with zeros for the
// common resources none has, and status.nodes their count; another pool's
// NodeClaims do not count.
func TestNodePoolResources(t *testing.T) {
	claim := func(name, pool string, capacity corev1.ResourceList) *v1.NodeClaim {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: pool}}}
		nc.Status.Capacity = capacity
		return nc
	}
	eni := corev1.ResourceName("vpc.amazonaws.com/pod-eni")
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}}}}}
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(np,
		claim("a", "pool", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), eni: resource.MustParse("9")}),
		claim("b", "pool", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), eni: resource.MustParse("3")}),
		claim("c", "other", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}),
	).WithStatusSubresource(&v1.NodePool{}).Build()
	got := reconciled(t, kube)
	cases := []struct {
		name corev1.ResourceName
		want string
	}{
		{corev1.ResourceCPU, "6"},
		{corev1.ResourceMemory, "8Gi"},
		{eni, "12"},
		{corev1.ResourcePods, "0"},
		{corev1.ResourceEphemeralStorage, "0"},
		{"nodes", "2"},
	}
	for _, tc := range cases {
		t.Run(string(tc.name), func(t *testing.T) {
			q, ok := got.Status.Resources[tc.name]
			if want := resource.MustParse(tc.want); !ok || q.Cmp(want) != 0 {
				t.Errorf("status.resources[%s] = %s (present %t), want %s", tc.name, q.String(), ok, tc.want)
			}
		})
	}
	if got.Status.Nodes == nil || *got.Status.Nodes != 2 {
		t.Errorf("status.nodes = %v, want 2", got.Status.Nodes)
	}
}

// reconciled runs the controller once on the NodePool "pool" and returns
// the NodePool as stored after it.
func reconciled(t *testing.T, kube client.Client) *v1.NodePool {
	t.Helper()
	c := &status.Controller{Client: kube, Cluster: &state.Cluster{Client: kube}, Clock: clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))}
	if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "pool"}}); err != nil {
		t.Fatal(err)
	}
	got := &v1.NodePool{}
	if err := kube.Get(context.Background(), types.NamespacedName{Name: "pool"}, got); err != nil {
		t.Fatal(err)
	}
	return got
}
