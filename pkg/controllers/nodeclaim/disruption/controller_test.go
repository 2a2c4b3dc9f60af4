package disruption_test

import (
	"context"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/kwok"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var now = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func pool(consolidateAfter string) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration(consolidateAfter)
	np.Spec.Template.Labels = map[string]string{"team": "a"}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
	return np
}

func class() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: awsv1.EC2NodeClassSpec{Role: "node", AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}}}
}

// claim is an initialized NodeClaim of pool launched from class, carrying
// annotations.
func claim(annotations map[string]string, conditions ...metav1.Condition) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{v1.LabelNodePool: "default"}, Annotations: annotations}}
	nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
	nc.Status.ProviderID = "kwok://us-east-1/us-east-1a/default-abc"
	nc.Status.Conditions = append([]metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized",
		LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}, conditions...)
	return nc
}

func current() map[string]string {
	return map[string]string{
		v1.AnnotationNodePoolHash: pool("Never").Hash(), v1.AnnotationNodePoolHashVersion: v1.NodePoolHashVersion,
		awsv1.AnnotationEC2NodeClassHash: class().Hash(), awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion,
	}
}

// newController runs the controller on a fake client holding objs, with the
// kwok provider (whose drift check reads the EC2NodeClass) on the same client.
func newController(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) (*disruption.Controller, client.Client) {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(objs...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	kube := b.Build()
	provider, err := kwok.New(kube, kwok.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &disruption.Controller{Client: kube, CloudProvider: provider, Clock: clocktesting.NewFakeClock(now)}, kube
}

// settle reconciles until the controller no longer asks for a quick retry.
func settle(t *testing.T, c *disruption.Controller, name string) {
	t.Helper()
	for range 5 {
		res, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter > time.Second {
			return
		}
	}
	t.Fatal("still retrying after 5 reconciles")
}

func get(t *testing.T, kube client.Client, name string) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := kube.Get(context.Background(), types.NamespacedName{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

func drifted(nc *v1.NodeClaim) string {
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return "absent"
}

// TestHashVersions checks that hashes of another version (Karpenter's) are
// re-stamped rather than drifted, and that a real change under our version
// still drifts.
func TestHashVersions(t *testing.T) {
	karpenter := map[string]string{
		v1.AnnotationNodePoolHash: "6043272443413522209", v1.AnnotationNodePoolHashVersion: "v3",
		awsv1.AnnotationEC2NodeClassHash: "13049766342429364493", awsv1.AnnotationEC2NodeClassHashVersion: "v6",
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	driftedBy := func(reason string) metav1.Condition {
		return metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(now)}
	}
	cases := []struct {
		name       string
		claim      *v1.NodeClaim
		want       map[string]string
		wantDrift  string
		keepsStale bool
	}{
		{name: "Karpenter's hashes are re-stamped, not drifted", claim: claim(karpenter), want: current(), wantDrift: "absent"},
		{name: "missing hashes are stamped", claim: claim(nil), want: current(), wantDrift: "absent"},
		{name: "current hashes stay", claim: claim(current()), want: current(), wantDrift: "absent"},
		{name: "a NodePool change under our version drifts", claim: claim(with(current(), v1.AnnotationNodePoolHash, "1")),
			want: with(current(), v1.AnnotationNodePoolHash, "1"), wantDrift: "True/NodePoolDrifted"},
		{name: "an EC2NodeClass change under our version drifts", claim: claim(with(current(), awsv1.AnnotationEC2NodeClassHash, "1")),
			want: with(current(), awsv1.AnnotationEC2NodeClassHash, "1"), wantDrift: "True/NodeClassDrift"},
		{name: "a NodeClaim Karpenter found drifted on its NodePool stays drifted", claim: claim(karpenter, driftedBy("NodePoolDrifted")),
			want: with(current(), v1.AnnotationNodePoolHash, karpenter[v1.AnnotationNodePoolHash]), wantDrift: "True/NodePoolDrifted"},
		{name: "a NodeClaim Karpenter found drifted on its EC2NodeClass stays drifted", claim: claim(karpenter, driftedBy("NodeClassDrift")),
			want: with(current(), awsv1.AnnotationEC2NodeClassHash, karpenter[awsv1.AnnotationEC2NodeClassHash]), wantDrift: "True/NodeClassDrift"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, kube := newController(t, nil, pool("Never"), class(), tc.claim)
			settle(t, c, tc.claim.Name)
			got := get(t, kube, tc.claim.Name)
			for k, v := range tc.want {
				if got.Annotations[k] != v {
					t.Errorf("%s = %q, want %q", k, got.Annotations[k], v)
				}
			}
			if d := drifted(got); d != tc.wantDrift {
				t.Errorf("Drifted %s, want %s", d, tc.wantDrift)
			}
		})
	}
}

// TestConcurrentConditionWrites has another controller set a condition
// between this controller's read and its write. A merge patch replaces the
// whole conditions list, so without the optimistic lock the other
// controller's condition would be lost.
func TestConcurrentConditionWrites(t *testing.T) {
	other := metav1.Condition{Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: "Underutilized", LastTransitionTime: metav1.NewTime(now)}
	raced := false
	funcs := &interceptor.Funcs{SubResourcePatch: func(ctx context.Context, kube client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		if !raced {
			raced = true
			nc := &v1.NodeClaim{}
			if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), nc); err != nil {
				return err
			}
			meta.SetStatusCondition(&nc.Status.Conditions, other)
			if err := kube.Status().Update(ctx, nc); err != nil {
				return err
			}
		}
		return kube.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}}
	c, kube := newController(t, funcs, pool("0s"), class(), claim(current()))
	settle(t, c, "default-abc")
	got := get(t, kube, "default-abc")
	for _, want := range []string{v1.ConditionTypeConsolidatable, v1.ConditionTypeDisruptionReason} {
		if !meta.IsStatusConditionTrue(got.Status.Conditions, want) {
			t.Errorf("condition %s lost: %v", want, got.Status.Conditions)
		}
	}
}
