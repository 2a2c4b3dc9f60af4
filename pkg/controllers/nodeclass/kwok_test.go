package nodeclass_test

import (
	"context"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclass"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Under kwok a class is Ready, stamped with its hash, and stays Ready
// across spec changes: every condition is rewritten for the new generation.
func TestKwokController(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	_ = awsv1.AddToScheme(scheme)
	nc := guideClass()
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nc).WithStatusSubresource(&awsv1.EC2NodeClass{}).Build()
	c := &nodeclass.KwokController{Client: kube, Clock: clocktesting.NewFakeClock(time.Now())}
	ctx := context.Background()
	get := func() *awsv1.EC2NodeClass {
		got := &awsv1.EC2NodeClass{}
		if err := kube.Get(ctx, types.NamespacedName{Name: "default"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for gen := int64(1); gen <= 2; gen++ {
		if gen == 2 {
			cur := get()
			cur.Spec.Tags = map[string]string{"team": "a"}
			cur.Generation = 2
			if err := kube.Update(ctx, cur); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "default"}}); err != nil {
			t.Fatal(err)
		}
		got := get()
		if status, reason, msg := got.Readiness(); status != metav1.ConditionTrue {
			t.Errorf("generation %d: Readiness %s %s %q", gen, status, reason, msg)
		}
		checkConditions(t, got, allTrue())
		if got.Annotations[awsv1.AnnotationEC2NodeClassHash] != got.Hash() {
			t.Errorf("generation %d: hash annotation %q, want %q", gen, got.Annotations[awsv1.AnnotationEC2NodeClassHash], got.Hash())
		}
		if got.Status.InstanceProfile != "kwok_default" {
			t.Errorf("instance profile %q", got.Status.InstanceProfile)
		}
	}
}
