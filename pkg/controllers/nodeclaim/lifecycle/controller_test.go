package lifecycle_test

import (
	"context"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	_ "github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestInitializedOnceDespiteConflicts loses the race for the NodeClaim's
// status on the first try: the retry initializes it, and the metric and
// the log line count it once.
func TestInitializedOnceDespiteConflicts(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	const providerID = "fake:///zone-a/i-1"
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "init-once", Labels: map[string]string{v1.LabelNodePool: "init-once"}, Finalizers: []string{v1.TerminationFinalizer}}}
	nc.Status.ProviderID = providerID
	for _, c := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered} {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: c, LastTransitionTime: metav1.NewTime(now)})
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{}}, Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	conflicts := 1
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(nc, node).
		WithIndex(&corev1.Node{}, lifecycle.ProviderIDIndex, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*v1.NodeClaim); ok && conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(schema.GroupResource{Group: v1.Group, Resource: "nodeclaims"}, obj.GetName(), nil)
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	c := &lifecycle.Controller{Client: kube, Reader: kube, Recorder: record.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(now)}
	counted := func() float64 { return counter(t, "karpenter_nodeclaims_initialized_total", "init-once") }
	before := counted()
	for range 3 {
		if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	got := &v1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeInitialized) {
		t.Fatalf("not initialized: %v", got.Status.Conditions)
	}
	if n := counted() - before; n != 1 {
		t.Fatalf("initialized counted %v times, want once", n)
	}
}

// counter reads a nodepool's counter from the registry Joiner serves.
func counter(t *testing.T, name, nodePool string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "nodepool" && l.GetValue() == nodePool {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestRegistrationOwnsTheNode: the registered Node is owned by its
// NodeClaim with blockOwnerDeletion, so that a foreground deletion of the
// NodeClaim waits for the Node, as with Karpenter.
func TestRegistrationOwnsTheNode(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	const providerID = "fake:///zone-a/i-1"
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "owner", UID: "nc-uid", Labels: map[string]string{v1.LabelNodePool: "p"}, Finalizers: []string{v1.TerminationFinalizer}}}
	nc.Status.ProviderID = providerID
	nc.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(now)}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(nc, node).
		WithIndex(&corev1.Node{}, lifecycle.ProviderIDIndex, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).Build()
	c := &lifecycle.Controller{Client: kube, Reader: kube, Recorder: record.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(now), RegistrationTTL: time.Hour}
	if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Node{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(node), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 1 {
		t.Fatalf("owner references %v, want the NodeClaim", got.OwnerReferences)
	}
	ref := got.OwnerReferences[0]
	if ref.Kind != "NodeClaim" || ref.Name != "owner" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Fatalf("owner reference %+v, want NodeClaim owner with blockOwnerDeletion: true", ref)
	}
}

// launchCloud records the NodeClaims Create was given.
type launchCloud struct {
	cloudprovider.CloudProvider
	kube  client.Client
	given []*v1.NodeClaim
	// stored is the NodeClaim as the API server had it during each Create.
	stored []*v1.NodeClaim
	// deleted counts Delete calls.
	deleted int
}

func (c *launchCloud) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	c.given = append(c.given, nc.DeepCopy())
	s := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKeyFromObject(nc), s); err != nil {
		return nil, err
	}
	c.stored = append(c.stored, s)
	out := nc.DeepCopy()
	out.Status.ProviderID = "fake:///zone-a/i-1"
	return out, nil
}

// Delete finds no machine: none was launched.
func (c *launchCloud) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	c.deleted++
	return &cloudprovider.NodeClaimNotFoundError{}
}

// TestLaunchIsRecordedBeforeTheCloudIsAsked: the launch attempt is on the
// NodeClaim before Create runs, so that when the result's write fails the
// retry's Create knows to resume it (the cloud provider's part); the first
// Create is not told, as it has nothing to resume.
func TestLaunchIsRecordedBeforeTheCloudIsAsked(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "launching", Labels: map[string]string{v1.LabelNodePool: "p"}, Finalizers: []string{v1.TerminationFinalizer},
		CreationTimestamp: metav1.NewTime(now)}}
	failures := 1
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(nc).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if failures > 0 {
				failures--
				return apierrors.NewServiceUnavailable("etcd leader changed")
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	cloud := &launchCloud{kube: kube}
	c := &lifecycle.Controller{Client: kube, Reader: kube, CloudProvider: cloud, Recorder: record.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(now), LaunchTTL: time.Hour}
	for range 2 {
		_, _ = c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
	}
	if len(cloud.given) != 2 {
		t.Fatalf("Create called %d times, want 2 (the first result's write failed)", len(cloud.given))
	}
	want := now.Format(time.RFC3339)
	for i := range cloud.given {
		if got := cloud.stored[i].Annotations[v1.AnnotationLaunchAttempted]; got != want {
			t.Errorf("call %d: stored NodeClaim's %s = %q, want %q before Create", i+1, v1.AnnotationLaunchAttempted, got, want)
		}
		// The first attempt has nothing to resume; the retry does.
		wantGiven := want
		if i == 0 {
			wantGiven = ""
		}
		if got := cloud.given[i].Annotations[v1.AnnotationLaunchAttempted]; got != wantGiven {
			t.Errorf("call %d: Create given %s = %q, want %q", i+1, v1.AnnotationLaunchAttempted, got, wantGiven)
		}
	}
}

// TestNoLaunchForADeletedClaimTheCacheStillShows: after an
// insufficient-capacity error deletes a NodeClaim, the cache may hand the
// next reconcile the claim as it was. The live read shows the deletion,
// and the cloud is not asked again (CI saw a second CreateFleet under the
// same client token, refused as IdempotentParameterMismatch).
func TestNoLaunchForADeletedClaimTheCacheStillShows(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	alive := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "refused", Labels: map[string]string{v1.LabelNodePool: "p"}, Finalizers: []string{v1.TerminationFinalizer},
		CreationTimestamp: metav1.NewTime(now), Annotations: map[string]string{v1.AnnotationLaunchAttempted: now.Format(time.RFC3339)}}}
	deleting := alive.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	cache := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(alive).Build()
	live := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(deleting).Build()
	cloud := &launchCloud{kube: live}
	c := &lifecycle.Controller{Client: cache, Reader: live, CloudProvider: cloud, Recorder: record.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(now), LaunchTTL: time.Hour}
	_, _ = c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: alive.Name}})
	if len(cloud.given) != 0 {
		t.Fatalf("Create called %d times for a NodeClaim the API server has marked for deletion; want 0", len(cloud.given))
	}
	if cloud.deleted != 1 {
		t.Fatalf("Delete called %d times; want 1, the deleted claim finalized", cloud.deleted)
	}
}

// TestWritesSkipWhatDidNotChange: Patch and PatchStatus send nothing when
// the object is as stored, and send a change.
func TestWritesSkipWhatDidNotChange(t *testing.T) {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "waiting", Labels: map[string]string{v1.LabelNodePool: "p"}}}
	cases := []struct {
		name   string
		change func(*v1.NodeClaim)
		write  func(context.Context, client.Client, client.Object, client.Object) error
		want   int
	}{
		{"status unchanged", func(*v1.NodeClaim) {}, lifecycle.PatchStatus, 0},
		{"status changed", func(nc *v1.NodeClaim) { nc.Status.NodeName = "n1" }, lifecycle.PatchStatus, 1},
		{"object unchanged", func(*v1.NodeClaim) {}, lifecycle.Patch, 0},
		{"object changed", func(nc *v1.NodeClaim) { nc.Labels["team"] = "a" }, lifecycle.Patch, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			writes := 0
			kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(nc.DeepCopy()).
				WithInterceptorFuncs(interceptor.Funcs{
					Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
						writes++
						return cl.Patch(ctx, obj, patch, opts...)
					},
					SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
						writes++
						return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
					}}).Build()
			got := &v1.NodeClaim{}
			if err := kube.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err != nil {
				t.Fatal(err)
			}
			stored := got.DeepCopy()
			c.change(got)
			if err := c.write(context.Background(), kube, got, stored); err != nil {
				t.Fatal(err)
			}
			if writes != c.want {
				t.Errorf("%d writes, want %d", writes, c.want)
			}
		})
	}
}

// TestARaceLostToAStaleCacheIsRetriedFromTheAPIServer: the cache holds an
// object older than the API server's, so the registration's write loses
// the race; the retry reads it around the cache and wins, however far the
// cache is still behind.
func TestARaceLostToAStaleCacheIsRetriedFromTheAPIServer(t *testing.T) {
	for _, stale := range []string{"nodeclaim", "node"} {
		t.Run(stale, func(t *testing.T) {
			now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
			const providerID = "fake:///zone-a/i-1"
			nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "raced", Labels: map[string]string{v1.LabelNodePool: "p"}, Finalizers: []string{v1.TerminationFinalizer}}}
			nc.Status.ProviderID = providerID
			nc.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(now)}}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{ProviderID: providerID},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
			ctx := context.Background()
			conflicts := 0
			counted := func(err error) error {
				if apierrors.IsConflict(err) {
					conflicts++
				}
				return err
			}
			live := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(nc, node).
				WithIndex(&corev1.Node{}, lifecycle.ProviderIDIndex, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
				// The API server selects nodes by name; the fake needs an index.
				WithIndex(&corev1.Node{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
				WithInterceptorFuncs(interceptor.Funcs{
					Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
						return counted(c.Patch(ctx, obj, patch, opts...))
					},
					SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
						return counted(c.SubResource(sub).Patch(ctx, obj, patch, opts...))
					},
				}).Build()
			// The cache keeps the copies read now; someone else then writes.
			oldClaim, oldNode := &v1.NodeClaim{}, &corev1.Node{}
			if err := live.Get(ctx, client.ObjectKeyFromObject(nc), oldClaim); err != nil {
				t.Fatal(err)
			}
			if err := live.Get(ctx, client.ObjectKeyFromObject(node), oldNode); err != nil {
				t.Fatal(err)
			}
			switch stale {
			case "nodeclaim":
				bumped := oldClaim.DeepCopy()
				bumped.Status.LastPodEventTime = metav1.NewTime(now)
				if err := live.Status().Update(ctx, bumped); err != nil {
					t.Fatal(err)
				}
			case "node":
				bumped := oldNode.DeepCopy()
				bumped.Labels = map[string]string{"someone": "else"}
				if err := live.Update(ctx, bumped); err != nil {
					t.Fatal(err)
				}
			}
			cache := interceptor.NewClient(live, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if got, ok := obj.(*v1.NodeClaim); ok && stale == "nodeclaim" {
						oldClaim.DeepCopyInto(got)
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if got, ok := list.(*corev1.NodeList); ok && stale == "node" {
						got.Items = []corev1.Node{*oldNode.DeepCopy()}
						return nil
					}
					return c.List(ctx, list, opts...)
				},
			})
			c := &lifecycle.Controller{Client: cache, Reader: live, Recorder: record.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(now), RegistrationTTL: time.Hour}
			for range 2 {
				if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}); err != nil {
					t.Fatal(err)
				}
			}
			got := &v1.NodeClaim{}
			if err := live.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
				t.Fatal(err)
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeRegistered) {
				t.Fatalf("not registered after the retry: %v", got.Status.Conditions)
			}
			if conflicts != 1 {
				t.Fatalf("%d conflicts, want 1: the retry read the stale cache again", conflicts)
			}
		})
	}
}
