package disruption

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

const zone = "us-east-1a"

var (
	catalogOnce  sync.Once
	catalogTypes []*cloudprovider.InstanceType
)

// fakeCloud offers the catalog's instance types; the controller calls
// nothing else of a cloud provider.
type fakeCloud struct{ cloudprovider.CloudProvider }

func (fakeCloud) InstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	catalogOnce.Do(func() {
		var err error
		if catalogTypes, err = catalog.InstanceTypes(catalog.Options{}); err != nil {
			panic(err)
		}
	})
	return catalogTypes, nil
}

func instanceType(name string) *cloudprovider.InstanceType {
	types, _ := fakeCloud{}.InstanceTypes(context.Background(), nil)
	for _, it := range types {
		if it.Name == name {
			return it
		}
	}
	panic("no instance type " + name)
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1.AddToScheme(s)
	_ = awsv1.AddToScheme(s)
	return s
}

// world is a fake cluster with a fake clock, in which a "cloud" launches
// the replacements the controller creates (when launch is set).
type world struct {
	t    *testing.T
	fc   *clocktesting.FakeClock
	kube client.WithWatch
	rec  *record.FakeRecorder
	c    *Controller

	mu sync.Mutex
	// fail returns an error to inject for an operation ("create",
	// "delete", "patch", "status", "get", "list") on an object, or nil.
	fail func(op string, obj client.Object) error
	// launch, when set, initializes each replacement as it is created,
	// then runs (pods arriving meanwhile, for instance).
	launch func(w *world, nc *v1.NodeClaim)
	// taintedAtLaunch says, for each replacement created, whether the
	// candidate was tainted then.
	taintedAtLaunch []bool
	// statusPatches are the NodeClaim status patches sent.
	statusPatches []string
}

func newWorld(t *testing.T, budget string, objs ...client.Object) *world {
	w := &world{t: t, fc: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)), rec: record.NewFakeRecorder(1000)}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	class.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}, Spec: v1.NodePoolSpec{
		Disruption: v1.Disruption{ConsolidationPolicy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: v1.MustParseNillableDuration("0s"),
			Budgets: []v1.Budget{{Nodes: budget}}},
		Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
				{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
				{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}},
			}}}}}
	inner := fake.NewClientBuilder().WithScheme(scheme()).
		WithStatusSubresource(&v1.NodeClaim{}, &v1.NodePool{}, &awsv1.EC2NodeClass{}).
		WithObjects(append([]client.Object{class, pool}, objs...)...).Build()
	w.kube = interceptor.NewClient(inner, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			obj.SetName(key.Name)
			if err := w.injected("get", obj); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := w.injectedList(list); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := w.injected("create", obj); err != nil {
				return err
			}
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			if nc, ok := obj.(*v1.NodeClaim); ok {
				w.observeLaunch(ctx, c, nc)
			}
			return nil
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := w.injected("delete", obj); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := w.injected("patch", obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := w.injected("status", obj); err != nil {
				return err
			}
			if data, err := patch.Data(obj); err == nil {
				w.mu.Lock()
				w.statusPatches = append(w.statusPatches, string(data))
				w.mu.Unlock()
			}
			return c.Status().Patch(ctx, obj, patch, opts...)
		},
	})
	w.c = &Controller{Client: w.kube, Cluster: &state.Cluster{Client: w.kube, CloudProvider: fakeCloud{}}, CloudProvider: fakeCloud{},
		Recorder: w.rec, Clock: w.fc, Poll: 10 * time.Second, ReadyTimeout: 10 * time.Minute,
		Nominations: &state.Nominations{Clock: w.fc, Window: 20 * time.Second}}
	return w
}

func (w *world) injected(op string, obj client.Object) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail == nil {
		return nil
	}
	return w.fail(op, obj)
}

func (w *world) injectedList(list client.ObjectList) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail == nil {
		return nil
	}
	var obj client.Object
	switch list.(type) {
	case *policyv1.PodDisruptionBudgetList:
		obj = &policyv1.PodDisruptionBudget{}
	case *corev1.PodList:
		obj = &corev1.Pod{}
	default:
		return nil
	}
	return w.fail("list", obj)
}

// observeLaunch records whether the candidates were tainted when a
// replacement was created, and launches it when the world says so.
func (w *world) observeLaunch(ctx context.Context, c client.Client, nc *v1.NodeClaim) {
	var nodes corev1.NodeList
	_ = c.List(ctx, &nodes)
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, "old") {
			w.taintedAtLaunch = append(w.taintedAtLaunch, taints.Has(n.Spec.Taints, v1.DisruptedNoScheduleTaint))
		}
	}
	if w.launch == nil {
		return
	}
	w.initialize(ctx, c, nc)
	w.launch(w, nc)
}

// initialize gives a replacement its node, Ready, and initializes it.
func (w *world) initialize(ctx context.Context, c client.Client, nc *v1.NodeClaim) {
	typ := nc.Spec.Requirements[0].Values[0]
	for _, r := range nc.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable {
			typ = r.Values[0]
		}
	}
	name := "node-" + nc.Name
	node, claim := nodeAndClaim(name, typ, true)
	node.Name = name
	if err := c.Create(ctx, node); err != nil {
		w.t.Errorf("launching %s: %v", nc.Name, err)
		return
	}
	stored := nc.DeepCopy()
	nc.Labels = claim.Labels
	if err := c.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		w.t.Errorf("labelling %s: %v", nc.Name, err)
	}
	stored = nc.DeepCopy()
	nc.Status = claim.Status
	if err := c.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		w.t.Errorf("initializing %s: %v", nc.Name, err)
	}
}

// nodeAndClaim is an initialized (or not), Ready node of a catalog type and
// its NodeClaim, named alike, without finalizers (deleting removes them).
func nodeAndClaim(name, typ string, initialized bool) (*corev1.Node, *v1.NodeClaim) {
	it := instanceType(typ)
	labels := map[string]string{v1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: typ, corev1.LabelTopologyZone: zone,
		v1.LabelCapacityType: "on-demand", corev1.LabelHostname: name}
	for k, v := range it.Labels {
		labels[k] = v
	}
	providerID := "kwok://" + name
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Allocatable: it.Allocatable, Capacity: it.Capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	nc.Status.ProviderID, nc.Status.NodeName = providerID, name
	nc.Status.Allocatable, nc.Status.Capacity = it.Allocatable, it.Capacity
	now := metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))
	nc.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: now}}
	if initialized {
		nc.Status.Conditions = append(nc.Status.Conditions,
			metav1.Condition{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: now},
			metav1.Condition{Type: v1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue, Reason: "Consolidatable", LastTransitionTime: now})
	}
	return node, nc
}

func boundPod(name, node, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func pendingPod(name, cpu string, since time.Time) *corev1.Pod {
	p := boundPod(name, "", cpu)
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(since)}}}
	return p
}

// replaceable is the guide's scale-down: a c6a.2xlarge left with one 1-cpu
// pod, which a c6a.large replaces.
func replaceable() []client.Object {
	node, nc := nodeAndClaim("old", "c6a.2xlarge", true)
	return []client.Object{node, nc, boundPod("inflate-0", "old", "1")}
}

// drive runs f while stepping the fake clock whenever something waits on it.
func (w *world) drive(f func()) {
	w.t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-done:
			return
		case <-deadline:
			w.t.Fatal("timed out")
		case <-time.After(time.Millisecond):
			if w.fc.HasWaiters() {
				w.fc.Step(time.Second)
			}
		}
	}
}

// reconcileUntilTheDeletionWaits starts a pass with a 15 s validation
// delay and returns once its command waits on the clock, with the pass's
// result to come on done: a test changes the cluster meanwhile, then drives
// the clock on.
func (w *world) reconcileUntilTheDeletionWaits() (done chan error) {
	w.t.Helper()
	w.c.ValidationDelay = 15 * time.Second
	done = make(chan error, 1)
	go func() { done <- w.c.Reconcile(context.Background()) }()
	deadline := time.Now().Add(30 * time.Second)
	for !w.fc.HasWaiters() {
		if time.Now().After(deadline) {
			w.t.Fatal("the command never waited")
		}
		time.Sleep(time.Millisecond)
	}
	return done
}

func (w *world) reconcile() error {
	var err error
	w.drive(func() { err = w.c.Reconcile(context.Background()) })
	return err
}

func (w *world) claim(name string) *v1.NodeClaim {
	var nc v1.NodeClaim
	if err := w.kube.Get(context.Background(), client.ObjectKey{Name: name}, &nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		w.t.Fatal(err)
	}
	return &nc
}

func (w *world) tainted(node string) bool {
	var n corev1.Node
	if err := w.kube.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		w.t.Fatal(err)
	}
	return taints.Has(n.Spec.Taints, v1.DisruptedNoScheduleTaint)
}

// replacements are the NodeClaims the controller created, and whether each
// is being deleted or gone.
func (w *world) replacements() (alive, deleted int) {
	var claims v1.NodeClaimList
	if err := w.kube.List(context.Background(), &claims); err != nil {
		w.t.Fatal(err)
	}
	for _, nc := range claims.Items {
		if nc.GenerateName == "" {
			continue
		}
		if nc.DeletionTimestamp != nil {
			deleted++
		} else {
			alive++
		}
	}
	return alive, deleted
}

func (w *world) events() string {
	var out []string
	for {
		select {
		case e := <-w.rec.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// releasedByAPassWithoutFaults ends the injected faults, runs a pass and
// checks that it released node.
func (w *world) releasedByAPassWithoutFaults(node string, kept int) {
	w.t.Helper()
	w.mu.Lock()
	w.fail = nil
	w.mu.Unlock()
	if err := w.reconcile(); err != nil {
		w.t.Fatal(err)
	}
	w.released(node, kept)
}

// released checks that a command left nothing behind on the candidate: no
// taint, no DisruptionReason, and kept live replacements (those kept
// because they did not initialize in time, as Karpenter keeps them).
func (w *world) released(node string, kept int) {
	w.t.Helper()
	if w.tainted(node) {
		w.t.Errorf("node %s keeps the disrupted taint", node)
	}
	nc := w.claim(node)
	if nc == nil || nc.DeletionTimestamp != nil {
		w.t.Fatalf("candidate %s was deleted", node)
	}
	if meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason) != nil {
		w.t.Errorf("nodeclaim %s keeps its DisruptionReason", node)
	}
	if alive, _ := w.replacements(); alive != kept {
		w.t.Errorf("%d replacement(s) left running, want %d", alive, kept)
	}
}

// TestBudgetsCountInitializedNodes: a budget of 50% applies to the
// initialized nodes only, and a NotReady node uses up one disruption.
func TestBudgetsCountInitializedNodes(t *testing.T) {
	var objs []client.Object
	for _, name := range []string{"empty-a", "empty-b"} {
		node, nc := nodeAndClaim(name, "c6a.large", true)
		objs = append(objs, node, nc)
	}
	// A NotReady node, not consolidatable (kept out of the decision).
	sick, sickClaim := nodeAndClaim("sick", "c6a.large", true)
	sick.Status.Conditions[0].Status = corev1.ConditionFalse
	meta.RemoveStatusCondition(&sickClaim.Status.Conditions, v1.ConditionTypeConsolidatable)
	objs = append(objs, sick, sickClaim, boundPod("sick-0", "sick", "1"))
	// Two NodeClaims still launching: counted, they would make 50% of 5
	// allow 3.
	for _, name := range []string{"launching-a", "launching-b"} {
		_, nc := nodeAndClaim(name, "c6a.large", false)
		nc.Status.NodeName, nc.Status.ProviderID = "", ""
		objs = append(objs, nc)
	}
	w := newWorld(t, "50%", objs...)
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	gone := 0
	for _, name := range []string{"empty-a", "empty-b"} {
		if nc := w.claim(name); nc == nil || nc.DeletionTimestamp != nil {
			gone++
		}
	}
	// 50% of 3 initialized nodes is 2, less the NotReady one: 1.
	if gone != 1 {
		t.Fatalf("%d empty node(s) removed, want 1; events:\n%s", gone, w.events())
	}
	if ev := w.events(); !strings.Contains(ev, `the disruption budget of nodepool "default" allows no more disruptions now`) {
		t.Errorf("no budget event for the other node:\n%s", ev)
	}
}
