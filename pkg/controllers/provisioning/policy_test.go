package provisioning_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/provisioning"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// catalogProvider offers the embedded catalog; the provisioner only asks
// for instance types.
type catalogProvider struct{ types []*cloudprovider.InstanceType }

func (p catalogProvider) InstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return p.types, nil
}
func (catalogProvider) Create(context.Context, *v1.NodeClaim) (*v1.NodeClaim, error) {
	return nil, errors.New("not used")
}
func (catalogProvider) Delete(context.Context, *v1.NodeClaim) error { return errors.New("not used") }
func (catalogProvider) Get(context.Context, string) (*v1.NodeClaim, error) {
	return nil, errors.New("not used")
}
func (catalogProvider) List(context.Context) ([]*v1.NodeClaim, error)            { return nil, nil }
func (catalogProvider) IsDrifted(context.Context, *v1.NodeClaim) (string, error) { return "", nil }
func (catalogProvider) Name() string                                             { return "catalog" }

func pool(name string, replicas *int64, reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodePool {
	return &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodePoolSpec{Replicas: replicas,
		Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: append([]v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
				{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
			}, reqs...),
		}}}}
}

func pendingPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
}

func provision(t *testing.T, sched scheduling.Options, objs ...client.Object) ([]v1.NodeClaim, []string) {
	t.Helper()
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Status: awsv1.EC2NodeClassStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}}}
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(append(objs, class, pendingPod())...).Build()
	rec := record.NewFakeRecorder(100)
	p := &provisioning.Provisioner{Client: kube, Cluster: &state.Cluster{Client: kube, CloudProvider: catalogProvider{its}}, Recorder: rec,
		Clock: clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)), Scheduling: sched}
	if err := p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	var claims v1.NodeClaimList
	if err := kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	return claims.Items, events
}

// A NodePool with spec.replicas is never used as a dynamic pool.
func TestStaticNodePoolIsLeftOut(t *testing.T) {
	three := int64(3)
	t.Run("alone, the pod stays pending and is told why", func(t *testing.T) {
		claims, events := provision(t, scheduling.Options{}, pool("static", &three))
		if len(claims) != 0 {
			t.Fatalf("%d NodeClaims from a static NodePool", len(claims))
		}
		if !strings.Contains(strings.Join(events, "\n"), `nodepool "static": spec.replicas is set (3), which makes this a static NodePool`) {
			t.Fatalf("events %q", events)
		}
	})
	t.Run("beside a dynamic NodePool, only that one launches", func(t *testing.T) {
		claims, _ := provision(t, scheduling.Options{}, pool("static", &three), pool("dynamic", nil))
		if len(claims) != 1 || claims[0].Labels[v1.LabelNodePool] != "dynamic" {
			t.Fatalf("claims %v", claims)
		}
	})
}

// A NodePool whose requirement values are not label values, which the CRD
// lets through as Karpenter's does, launches nothing: no node could carry
// such a value. A NodePool beside it still launches.
func TestNodePoolWithInvalidRequirementValueIsLeftOut(t *testing.T) {
	odd := v1.NodeSelectorRequirementWithMinValues{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a b"}}
	t.Run("alone, the pod stays pending and is told why", func(t *testing.T) {
		claims, events := provision(t, scheduling.Options{}, pool("odd", nil, odd))
		if len(claims) != 0 {
			t.Fatalf("%d NodeClaims from a NodePool with an invalid value", len(claims))
		}
		if !strings.Contains(strings.Join(events, "\n"), `nodepool "odd": spec.template.spec.requirements[2].values[0]: "a b" (key "team") is not a label value`) {
			t.Fatalf("events %q", events)
		}
	})
	t.Run("beside a valid NodePool, only that one launches", func(t *testing.T) {
		claims, _ := provision(t, scheduling.Options{}, pool("odd", nil, odd), pool("fine", nil))
		if len(claims) != 1 || claims[0].Labels[v1.LabelNodePool] != "fine" {
			t.Fatalf("claims %v", claims)
		}
	})
}

// Every planned NodeClaim says whether its minValues were relaxed, as
// Karpenter's do; Strict never launches a relaxed one.
func TestMinValuesRelaxedAnnotation(t *testing.T) {
	five := 5
	// Two families offered, five asked for.
	scarce := v1.NodeSelectorRequirementWithMinValues{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"m5", "c5", "x", "y", "z"}, MinValues: &five}
	plenty := v1.NodeSelectorRequirementWithMinValues{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpExists, MinValues: &five}
	cases := []struct {
		name   string
		policy scheduling.MinValuesPolicy
		req    v1.NodeSelectorRequirementWithMinValues
		want   string // annotation; "" means no NodeClaim
	}{
		{name: "met", policy: scheduling.MinValuesPolicyStrict, req: plenty, want: "false"},
		{name: "met under BestEffort", policy: scheduling.MinValuesPolicyBestEffort, req: plenty, want: "false"},
		{name: "relaxed under BestEffort", policy: scheduling.MinValuesPolicyBestEffort, req: scarce, want: "true"},
		{name: "not launched under Strict", policy: scheduling.MinValuesPolicyStrict, req: scarce},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claims, events := provision(t, scheduling.Options{MinValuesPolicy: tc.policy}, pool("flex", nil, tc.req))
			if tc.want == "" {
				if len(claims) != 0 || !strings.Contains(strings.Join(events, "\n"), `minValues 5 of requirement "karpenter.k8s.aws/instance-family" cannot be met`) {
					t.Fatalf("claims %d, events %q", len(claims), events)
				}
				return
			}
			if len(claims) != 1 {
				t.Fatalf("%d claims, events %q", len(claims), events)
			}
			if got := claims[0].Annotations[v1.AnnotationNodeClaimMinValuesRelaxed]; got != tc.want {
				t.Fatalf("%s=%q, want %q", v1.AnnotationNodeClaimMinValuesRelaxed, got, tc.want)
			}
		})
	}
}
