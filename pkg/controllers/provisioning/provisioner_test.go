package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

type catalogCloud struct{ cloudprovider.CloudProvider }

func (catalogCloud) InstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return catalog.InstanceTypes(catalog.Options{})
}

func pendingPod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
}

// provisionerWorld is a fake cluster whose cache, while it lags, holds
// none of the NodeClaims the provisioner created; catchUp lets it see them,
// as an informer would.
type provisionerWorld struct {
	fc    *clocktesting.FakeClock
	inner client.WithWatch
	kube  client.Client
	p     *Provisioner

	mu      sync.Mutex
	lagging bool
	creates int
}

func newProvisionerWorld(t *testing.T, objs ...client.Object) *provisionerWorld {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1.AddToScheme(s)
	_ = awsv1.AddToScheme(s)
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	class.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool"}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
	}}}}
	w := &provisionerWorld{fc: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	w.inner = fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1.NodeClaim{}, &awsv1.EC2NodeClass{}).WithObjects(append([]client.Object{class, pool}, objs...)...).Build()
	w.kube = interceptor.NewClient(w.inner, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1.NodeClaim); ok && w.lags() {
				return apierrors.NewNotFound(schema.GroupResource{Group: v1.Group, Resource: "nodeclaims"}, key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*v1.NodeClaimList); ok && w.lags() {
				return nil
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*v1.NodeClaim); ok {
				w.mu.Lock()
				w.creates++
				w.mu.Unlock()
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	nominations := &state.Nominations{Clock: w.fc, Window: 20 * time.Second}
	w.p = &Provisioner{Client: w.kube, Cluster: &state.Cluster{Client: w.kube, CloudProvider: catalogCloud{}, Clock: w.fc, Nominations: nominations},
		Recorder: record.NewFakeRecorder(100), Clock: w.fc, Nominations: nominations}
	return w
}

func (w *provisionerWorld) lags() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lagging
}

// catchUp ends the lag: the cache holds every NodeClaim, and the informer
// tells the provisioner's cluster about each.
func (w *provisionerWorld) catchUp(t *testing.T) {
	w.mu.Lock()
	w.lagging = false
	w.mu.Unlock()
	for _, nc := range w.claims(t) {
		w.p.Cluster.Seen().OnAdd(nc.DeepCopy(), false)
	}
}

// reconcile runs one batch, stepping the fake clock while it waits, and
// returns how far the clock moved.
func (w *provisionerWorld) reconcile(t *testing.T) time.Duration {
	t.Helper()
	start := w.fc.Now()
	done := make(chan error)
	go func() { done <- w.p.Reconcile(context.Background()) }()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return w.fc.Since(start)
		case <-timeout:
			t.Fatal("timed out")
		case <-time.After(time.Millisecond):
			if w.fc.HasWaiters() {
				w.fc.Step(50 * time.Millisecond)
			}
		}
	}
}

// claims are the API server's NodeClaims, whatever the cache holds.
func (w *provisionerWorld) claims(t *testing.T) []v1.NodeClaim {
	var list v1.NodeClaimList
	if err := w.inner.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func (w *provisionerWorld) created() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.creates
}

// TestProvisionerCountsClaimsItsCacheLacks: a batch counts the NodeClaims
// the last one created while the cache does not hold them yet, so a lagging
// cache does not plan the same pods twice; and a claim the cache has held
// and seen deleted counts no more, so its pods are planned again.
func TestProvisionerCountsClaimsItsCacheLacks(t *testing.T) {
	cases := []struct {
		name string
		// between runs after the first batch, with the cache lagging.
		between func(t *testing.T, w *provisionerWorld)
		// step moves the clock before the second batch.
		step time.Duration
		want int
	}{
		{name: "the cache still lags", between: func(*testing.T, *provisionerWorld) {}, want: 1},
		{name: "the cache caught up", between: func(t *testing.T, w *provisionerWorld) { w.catchUp(t) }, want: 1},
		{name: "the cache held the claim and saw it deleted", between: func(t *testing.T, w *provisionerWorld) {
			w.catchUp(t)
			// Gone, not only deleting: a claim the API server still
			// holds is listed, and counts no capacity while it deletes.
			for _, nc := range w.claims(t) {
				nc.Finalizers = nil
				if err := w.inner.Update(context.Background(), &nc); err != nil {
					t.Fatal(err)
				}
				if err := w.inner.Delete(context.Background(), &nc); err != nil {
					t.Fatal(err)
				}
				w.p.Cluster.Seen().OnDelete(nc.DeepCopy())
			}
			if n := len(w.claims(t)); n != 0 {
				t.Fatalf("%d nodeclaims left after deleting them", n)
			}
		}, want: 2},
		{name: "the cache lags past RememberFor", between: func(*testing.T, *provisionerWorld) {}, step: state.RememberFor + time.Second, want: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newProvisionerWorld(t, pendingPod("p", "1"))
			w.lagging = true
			w.reconcile(t)
			tc.between(t, w)
			w.fc.Step(tc.step)
			w.reconcile(t)
			if got := w.created(); got != tc.want {
				t.Fatalf("%d nodeclaims created over two batches, want %d", got, tc.want)
			}
		})
	}
}

// TestProvisionerNominates: the NodeClaims a batch launches, and the
// in-flight capacity a later batch counts on, are nominated for their pods.
func TestProvisionerNominates(t *testing.T) {
	w := newProvisionerWorld(t, pendingPod("p-0", "1"))
	w.reconcile(t)
	claims := w.claims(t)
	if len(claims) != 1 {
		t.Fatalf("%d nodeclaims", len(claims))
	}
	first := claims[0].Name
	if got := w.p.Nominations.For("", first); len(got) != 1 || got[0] != "default/p-0" {
		t.Fatalf("nominations of the new nodeclaim: %v", got)
	}
	// A later batch: p-0 still waits, and fits the NodeClaim in flight.
	w.fc.Step(15 * time.Second)
	w.reconcile(t)
	if n := len(w.claims(t)); n != 1 {
		t.Fatalf("the second batch launched again: %d nodeclaims", n)
	}
	// Each batch tells the pod where it should go, as Karpenter's
	// Nominated event does: the launch, then the NodeClaim in flight.
	told := 0
	for rec := w.p.Recorder.(*record.FakeRecorder); len(rec.Events) > 0; {
		if e := <-rec.Events; e == "Normal Nominated Pod should schedule on: nodeclaim/"+first {
			told++
		}
	}
	if told != 2 {
		t.Fatalf("p-0 was told where to go %d times in two batches, want 2", told)
	}
	w.fc.Step(15 * time.Second)
	if got := w.p.Nominations.For("", first); len(got) != 1 {
		t.Fatalf("the second batch did not renew the nomination: %v", got)
	}
	w.fc.Step(10 * time.Second)
	if got := w.p.Nominations.For("", first); len(got) != 0 {
		t.Fatalf("the nomination outlived its window: %v", got)
	}
}

// TestProvisionerKeepsItsPlan: while the NodeClaims of a batch launch, the
// next batch plans the same pods again and must find them room on those
// NodeClaims, as the first batch planned them. Planned afresh one pod at a
// time over the claims in flight, 10,000 pods of the scale test's shapes
// left 2,796 over and 144 more NodeClaims were made (docs/benchmarks.md §7).
func TestProvisionerKeepsItsPlan(t *testing.T) {
	cases := []struct {
		name string
		// between runs after the first batch.
		between func(t *testing.T, w *provisionerWorld)
	}{
		{name: "the cache holds the claims", between: func(t *testing.T, w *provisionerWorld) { w.catchUp(t) }},
		{name: "the cache lags", between: func(*testing.T, *provisionerWorld) {}},
		{name: "a resync later", between: func(t *testing.T, w *provisionerWorld) { w.catchUp(t); w.fc.Step(10 * time.Second) }},
		// Past the nominations' window: on a busy API server batches came
		// minutes apart.
		{name: "three minutes later", between: func(t *testing.T, w *provisionerWorld) { w.catchUp(t); w.fc.Step(3 * time.Minute) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newProvisionerWorld(t, mixedPods(10)...)
			w.p.Recorder = record.NewFakeRecorder(10000)
			w.lagging = true
			w.reconcile(t)
			first := w.created()
			if first == 0 {
				t.Fatal("the first batch created no nodeclaims")
			}
			tc.between(t, w)
			w.reconcile(t)
			if more := w.created() - first; more != 0 {
				t.Fatalf("the second batch created %d nodeclaims over the first's %d for the same pods", more, first)
			}
		})
	}
}

// mixedPods are n pending pods of each of the scale test's 28 shapes: seven
// CPU sizes times four memory ratios, every fifth shape spread over zones.
func mixedPods(n int) []client.Object {
	cpus := []int{100, 250, 500, 750, 1000, 1500, 2000}
	var out []client.Object
	for i := 0; i < 28; i++ {
		c, ratio := cpus[i%7], []int{1, 2, 4, 8}[i/7]
		app := fmt.Sprintf("app-%02d", i)
		for j := 0; j < n; j++ {
			p := pendingPod(fmt.Sprintf("%s-%d", app, j), fmt.Sprintf("%dm", c))
			p.Labels = map[string]string{"app": app}
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(fmt.Sprintf("%dMi", c*ratio*1024/1000))
			if i%5 == 0 {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
			}
			out = append(out, p)
		}
	}
	return out
}

// TestProvisionerCreatesConcurrently: a batch's NodeClaims are created
// together, so their launches reach the cloud provider as one burst it can
// batch. Each create waits until all of them are in flight; created one at
// a time, each would wait out the bound and the count would stay at one.
func TestProvisionerCreatesConcurrently(t *testing.T) {
	const n = 6
	var pods []client.Object
	for i := 0; i < n; i++ {
		// 100 CPUs each: no instance type holds two.
		pods = append(pods, pendingPod(fmt.Sprintf("p-%d", i), "100"))
	}
	w := newProvisionerWorld(t, pods...)
	var mu sync.Mutex
	inflight, most := 0, 0
	all := make(chan struct{})
	w.p.Client = interceptor.NewClient(w.kube.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			mu.Lock()
			inflight++
			most = max(most, inflight)
			if inflight == n {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(2 * time.Second):
			}
			defer func() { mu.Lock(); inflight--; mu.Unlock() }()
			return c.Create(ctx, obj, opts...)
		},
	})
	w.reconcile(t)
	if got := len(w.claims(t)); got != n {
		t.Fatalf("%d nodeclaims, want %d", got, n)
	}
	if most != n {
		t.Fatalf("at most %d creates in flight, want all %d", most, n)
	}
}

// TestProvisionerWaitsForThePlanSlot: while disruption plans, a batch
// waits, and plans nothing if its context ends first.
func TestProvisionerWaitsForThePlanSlot(t *testing.T) {
	w := newProvisionerWorld(t, pendingPod("p", "1"))
	held, err := w.p.Cluster.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := w.p.Reconcile(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a batch while the slot was held: %v, want context.DeadlineExceeded", err)
	}
	if n := w.created(); n != 0 {
		t.Fatalf("%d nodeclaims created while the slot was held, want 0", n)
	}
	held()
	w.reconcile(t)
	if n := len(w.claims(t)); n != 1 {
		t.Fatalf("%d nodeclaims once the slot was free, want 1", n)
	}
}
