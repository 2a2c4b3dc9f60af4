package disruption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	w.launch(w, nc)
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

func TestAbandonWhenTheReplacementNeverInitializes(t *testing.T) {
	w := newWorld(t, "100%", replaceable()...)
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(w.taintedAtLaunch) != 1 || !w.taintedAtLaunch[0] {
		t.Fatalf("the candidate was not tainted before its replacement was launched: %v", w.taintedAtLaunch)
	}
	// Kept, as Karpenter keeps it, as an ordinary NodeClaim.
	w.released("old", 1)
	if _, deleted := w.replacements(); deleted != 0 {
		t.Fatalf("%d replacement(s) deleted, want 0", deleted)
	}
	var claims v1.NodeClaimList
	if err := w.kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims.Items {
		if _, ok := nc.Annotations[v1.AnnotationReplacing]; ok {
			t.Errorf("%s still says it is replacing: %v", nc.Name, nc.Annotations)
		}
	}
	// The next pass waits for it rather than launching another.
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	w.released("old", 1)
}

// TestAFailedUntaintKeepsTheMark: when an abandoned command cannot take
// the disrupted taint off its node, the NodeClaim keeps its
// DisruptionReason, the mark by which the next pass finds the node and
// releases it; cleared alone, it left the node unschedulable for good.
func TestAFailedUntaintKeepsTheMark(t *testing.T) {
	w := newWorld(t, "100%", replaceable()...)
	w.fail = func(op string, obj client.Object) error {
		if n, ok := obj.(*corev1.Node); ok && op == "patch" && !taints.Has(n.Spec.Taints, v1.DisruptedNoScheduleTaint) {
			return errors.New("injected")
		}
		return nil
	}
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if !w.tainted("old") {
		t.Fatal("the untaint did not fail as injected")
	}
	if nc := w.claim("old"); nc == nil || meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason) == nil {
		t.Fatal("the DisruptionReason went although the node kept its taint")
	}
	w.releasedByAPassWithoutFaults("old", 1)
}

func TestRecheckBeforeTheDrain(t *testing.T) {
	dnd := boundPod("precious", "old", "100m")
	dnd.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	cases := []struct {
		name string
		// arrive are the pods that reach the candidate (before its taint)
		// while the replacement launches.
		arrive []client.Object
		// landOnReplacement binds a pod to the replacement once it is up.
		landOnReplacement bool
		// shrink makes the replacement's node report a tenth of its
		// allocatable, so that packing the same pods a second time fails.
		shrink bool
		// wantAbandon is part of the abandon event; "" when the command
		// goes ahead.
		wantAbandon string
	}{
		{name: "nothing arrives: the candidate is deleted"},
		{name: "a do-not-disrupt pod arrives", arrive: []client.Object{dnd}, wantAbandon: `node old: pod default/precious has "karpenter.sh/do-not-disrupt: true"`},
		{name: "a pod that no longer fits arrives", arrive: []client.Object{boundPod("late", "old", "1")}, wantAbandon: "its pods no longer fit on the other nodes and the replacements"},
		{name: "a PDB that allows no eviction appears", arrive: []client.Object{&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "inflate-0"}}}}},
			wantAbandon: "node old: PDB default/inflate blocks the eviction of pod default/inflate-0"},
		{name: "a pod takes the replacement's room, and is not evicted with it", landOnReplacement: true, wantAbandon: "its pods no longer fit on the other nodes and the replacements"},
		// The plan was checked when it was made; with no pod come since, a
		// second packing would only abandon good commands over how it
		// differs from the first, and launch their replacements again.
		{name: "nothing arrives: the plan is not packed a second time", shrink: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "100%", replaceable()...)
			w.launch = func(w *world, nc *v1.NodeClaim) {
				if tc.shrink {
					var node corev1.Node
					if err := w.kube.Get(context.Background(), client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
						t.Fatal(err)
					}
					for k, q := range node.Status.Allocatable {
						q.SetMilli(q.MilliValue() / 10)
						node.Status.Allocatable[k] = q
					}
					if err := w.kube.Status().Update(context.Background(), &node); err != nil {
						t.Fatal(err)
					}
				}
				if tc.landOnReplacement {
					if err := w.kube.Create(context.Background(), boundPod("newcomer", nc.Status.NodeName, "1")); err != nil {
						t.Fatal(err)
					}
				}
				for _, o := range tc.arrive {
					if err := w.kube.Create(context.Background(), o); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			events := w.events()
			if tc.wantAbandon == "" {
				if nc := w.claim("old"); nc != nil && nc.DeletionTimestamp == nil {
					t.Fatalf("the candidate was not deleted; events:\n%s", events)
				}
				if alive, _ := w.replacements(); alive != 1 {
					t.Fatalf("%d replacement(s), want 1", alive)
				}
				if !strings.Contains(events, "DisruptionTerminating") {
					t.Errorf("no DisruptionTerminating event:\n%s", events)
				}
				return
			}
			if !strings.Contains(events, "DisruptionBlocked disruption abandoned: "+tc.wantAbandon) {
				t.Fatalf("no abandon event with %q:\n%s", tc.wantAbandon, events)
			}
			if tc.landOnReplacement {
				if alive, deleted := w.replacements(); alive != 1 || deleted != 0 {
					t.Fatalf("the replacement a pod runs on: %d alive, %d deleted; want it kept", alive, deleted)
				}
				return
			}
			w.released("old", 0)
			if _, deleted := w.replacements(); deleted != 1 {
				t.Fatalf("%d replacement(s) deleted, want 1", deleted)
			}
		})
	}
}

// TestEveryErrorPathCleansUp injects a failure at each step of a command
// and checks that nothing is left: taint, DisruptionReason, replacement.
func TestEveryErrorPathCleansUp(t *testing.T) {
	boom := errors.New("injected")
	isClaim := func(obj client.Object, name string) bool {
		_, ok := obj.(*v1.NodeClaim)
		return ok && (name == "" || obj.GetName() == name)
	}
	cases := []struct {
		name    string
		fail    func(op string, obj client.Object) error
		wantErr bool
	}{
		{name: "marking the NodeClaim fails", wantErr: true, fail: func(op string, obj client.Object) error {
			if op == "status" && isClaim(obj, "old") {
				return boom
			}
			return nil
		}},
		{name: "tainting the node fails", wantErr: true, fail: func(op string, obj client.Object) error {
			if _, ok := obj.(*corev1.Node); ok && op == "patch" {
				return boom
			}
			return nil
		}},
		{name: "launching the replacement fails", wantErr: true, fail: func(op string, obj client.Object) error {
			if op == "create" && isClaim(obj, "") {
				return boom
			}
			return nil
		}},
		{name: "reading the replacement fails", fail: func(op string, obj client.Object) error {
			if op == "get" && isClaim(obj, "") && obj.GetName() != "old" {
				return boom
			}
			return nil
		}},
		{name: "the recheck cannot list PDBs", wantErr: true, fail: func(op string, obj client.Object) error {
			if _, ok := obj.(*policyv1.PodDisruptionBudget); ok && op == "list" {
				return boom
			}
			return nil
		}},
		{name: "deleting the candidate fails", wantErr: true, fail: func(op string, obj client.Object) error {
			if op == "delete" && isClaim(obj, "old") {
				return boom
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "100%", replaceable()...)
			w.launch = func(*world, *v1.NodeClaim) {}
			// The decision reads what the command reads (PDBs): fail only
			// once the command has begun, with its first write.
			begun := false
			w.fail = func(op string, obj client.Object) error {
				if op == "status" && isClaim(obj, "old") {
					begun = true
				}
				if !begun {
					return nil
				}
				return tc.fail(op, obj)
			}
			err := w.reconcile()
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			w.mu.Lock()
			w.fail = nil
			w.mu.Unlock()
			w.released("old", 0)
		})
	}
}

// TestStatusWritesRetryOnConflict: a conflicting status write (another
// controller wrote the NodeClaim meanwhile) is read again and retried.
func TestStatusWritesRetryOnConflict(t *testing.T) {
	w := newWorld(t, "100%", replaceable()...)
	w.launch = func(*world, *v1.NodeClaim) {}
	conflicts := 0
	w.fail = func(op string, obj client.Object) error {
		if op == "status" && obj.GetName() == "old" && conflicts < 2 {
			conflicts++
			return apierrors.NewConflict(schema.GroupResource{Group: v1.Group, Resource: "nodeclaims"}, "old", errors.New("changed"))
		}
		return nil
	}
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if conflicts != 2 {
		t.Fatalf("%d conflicts", conflicts)
	}
	for _, p := range w.statusPatches {
		if !strings.Contains(p, `"resourceVersion"`) {
			t.Errorf("a status patch without optimistic locking: %s", p)
		}
	}
	if nc := w.claim("old"); nc != nil && nc.DeletionTimestamp == nil {
		t.Fatalf("the command did not go ahead after the conflicts: %s", w.events())
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

// TestNominationProtectsForItsWindow: a node the provisioner launched for
// pending pods is left alone while they wait, for the nomination's window,
// and only it; a pod pending anywhere else no longer stops all disruption.
func TestNominationProtectsForItsWindow(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// p waits for the node launched for it; it fits no node the model
	// knows, so only the nomination can protect that node.
	p := pendingPod("p", "1", now)
	p.Spec.NodeSelector = map[string]string{"example.com/for": "p"}
	cases := []struct {
		name string
		// then happens after the first round; the node must then go.
		then func(w *world)
	}{
		{name: "until the window ends", then: func(w *world) { w.fc.Step(21 * time.Second) }},
		{name: "until its pods no longer wait", then: func(w *world) {
			if err := w.kube.Delete(context.Background(), p.DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			for _, name := range []string{"launched-for-p", "idle"} {
				node, nc := nodeAndClaim(name, "c6a.large", true)
				objs = append(objs, node, nc)
			}
			// Pending just now, and fits nowhere: once, this paused everything.
			objs = append(objs, pendingPod("unplaceable", "500", now), p.DeepCopy())
			w := newWorld(t, "100%", objs...)
			w.c.Nominations.NominateNodeClaim("launched-for-p", p)
			if err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			if nc := w.claim("idle"); nc != nil && nc.DeletionTimestamp == nil {
				t.Fatalf("a pending pod elsewhere held back the empty node; events:\n%s", w.events())
			}
			if nc := w.claim("launched-for-p"); nc == nil || nc.DeletionTimestamp != nil {
				t.Fatal("the nominated node was removed")
			}
			if ev := w.events(); !strings.Contains(ev, "DisruptionBlocked nominated for pending pod default/p") {
				t.Fatalf("no event saying the node is nominated:\n%s", ev)
			}
			tc.then(w)
			if err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			if nc := w.claim("launched-for-p"); nc != nil && nc.DeletionTimestamp == nil {
				t.Fatalf("the node was still protected; events:\n%s", w.events())
			}
		})
	}
}

// TestExplainedIsPruned: the reasons given are forgotten with their nodes.
func TestExplainedIsPruned(t *testing.T) {
	node, nc := nodeAndClaim("kept", "c6a.large", true)
	node.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	w := newWorld(t, "100%", node, nc)
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.c.explained["kept"]; !ok {
		t.Fatalf("no reason recorded: %v", w.c.explained)
	}
	for _, o := range []client.Object{node, nc} {
		if err := w.kube.Delete(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(w.c.explained) != 0 {
		t.Fatalf("reasons kept for nodes that are gone: %v", w.c.explained)
	}
}

// TestStrikesWithoutAPause: pods that kube-scheduler leaves pending after
// a risky command are counted, without any pending pod stopping
// disruption; the pods of a node being deleted, pending only in the plan
// (state.Moving) with their bound pod's PodScheduled=True, are not.
func TestStrikesWithoutAPause(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pod      func(w *world, i int) *corev1.Pod
		cautious bool
	}{
		{"stranded pods count", func(w *world, i int) *corev1.Pod {
			return pendingPod(fmt.Sprintf("stranded-%d", i), "1", w.fc.Now())
		}, true},
		{"pods of a node being deleted do not", func(w *world, i int) *corev1.Pod {
			p := boundPod(fmt.Sprintf("moving-%d", i), "going", "1")
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(w.fc.Now())}}
			return p
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, nc := nodeAndClaim("going", "c6a.2xlarge", true)
			nc.Finalizers = []string{v1.TerminationFinalizer}
			w := newWorld(t, "100%", node, nc)
			if err := w.kube.Delete(context.Background(), nc); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				w.c.caution.Risked(w.fc.Now())
				w.fc.Step(30 * time.Second)
				if err := w.kube.Create(context.Background(), tc.pod(w, i)); err != nil {
					t.Fatal(err)
				}
				if err := w.reconcile(); err != nil {
					t.Fatal(err)
				}
			}
			if got := w.c.caution.Cautious(w.fc.Now()); got != tc.cautious {
				t.Fatalf("cautious = %v after three pods, want %v", got, tc.cautious)
			}
		})
	}
}

// TestDriftWithTerminationGracePeriod: a drifted node that only its pods
// protect (do-not-disrupt) is replaced when its NodeClaim has a
// terminationGracePeriod, which bounds how long the drain waits for them,
// and left alone without one, as in Karpenter.
func TestDriftWithTerminationGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tgp      *metav1.Duration
		replaced bool
	}{
		{name: "with a terminationGracePeriod: replaced", tgp: &metav1.Duration{Duration: time.Hour}, replaced: true},
		{name: "without one: left alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, nc := nodeAndClaim("old", "c6a.2xlarge", true)
			nc.Spec.TerminationGracePeriod = tc.tgp
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "AMIDrift",
				LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))})
			pinned := boundPod("pinned", "old", "1")
			pinned.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
			w := newWorld(t, "100%", node, nc, pinned)
			w.launch = func(*world, *v1.NodeClaim) {} // replacements come up
			if err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			got := w.claim("old")
			if replaced := got == nil || got.DeletionTimestamp != nil; replaced != tc.replaced {
				t.Fatalf("replaced %t, want %t; events:\n%s", replaced, tc.replaced, w.events())
			}
		})
	}
}

// TestDeletionsWaitAndSimulateAgain: a deletion waits ValidationDelay, its
// candidate still open to pods, then is tainted and simulated again; when
// the room it counted on was taken meanwhile it is abandoned, as
// Karpenter's validation does.
func TestDeletionsWaitAndSimulateAgain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fillOther bool
		deleted   bool
	}{
		{name: "the room is still there: deleted", deleted: true},
		{name: "a pod took the other node's room meanwhile: abandoned", fillOther: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, aClaim := nodeAndClaim("a", "c6a.xlarge", true)
			b, bClaim := nodeAndClaim("b", "c6a.2xlarge", true)
			w := newWorld(t, "100%", a, aClaim, b, bClaim, boundPod("a-0", "a", "2"), boundPod("b-0", "b", "5"))
			done := w.reconcileUntilTheDeletionWaits()
			if w.tainted("a") {
				t.Fatal("the candidate was tainted while the command waited: its room is held from pending pods")
			}
			if tc.fillOther {
				if err := w.kube.Create(context.Background(), boundPod("late", "b", "2")); err != nil {
					t.Fatal(err)
				}
			}
			w.drive(func() {
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			got := w.claim("a")
			if deleted := got == nil || got.DeletionTimestamp != nil; deleted != tc.deleted {
				t.Fatalf("deleted %t, want %t; events:\n%s", deleted, tc.deleted, w.events())
			}
			if !tc.deleted && w.tainted("a") {
				t.Error("the abandoned candidate keeps its taint")
			}
		})
	}
}

// TestADeletionGoesAheadWithWhatStillHolds: a deletion of several nodes
// whose recheck finds that not all of them may go any more deletes those
// before the first that may not, and releases the rest; Karpenter would
// abandon it whole. a and b each hold a 1-CPU pod that c's room holds
// both of, and the decision removes a first.
func TestADeletionGoesAheadWithWhatStillHolds(t *testing.T) {
	dnd := boundPod("precious", "b", "100m")
	dnd.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	for _, tc := range []struct {
		name string
		// arrive are created while the command waits, before the taint.
		arrive []client.Object
		// deleted and kept are the candidates deleted and released.
		deleted, kept []string
		want          string
	}{
		{name: "the room still holds both: both go", deleted: []string{"a", "b"}},
		{name: "a pod took room for one of them: a goes, b stays", arrive: []client.Object{boundPod("late", "c", "1")},
			deleted: []string{"a"}, kept: []string{"b"}, want: "1 more node(s) would be needed, for pod default/b-0 first"},
		{name: "a do-not-disrupt pod came to b: a goes, b stays", arrive: []client.Object{dnd},
			deleted: []string{"a"}, kept: []string{"b"}, want: `node b: pod default/precious has "karpenter.sh/do-not-disrupt: true"`},
		{name: "no room for the first: neither goes", arrive: []client.Object{boundPod("late", "c", "2")},
			kept: []string{"a", "b"}, want: "for pod default/a-0 first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, aClaim := nodeAndClaim("a", "c6a.large", true)
			b, bClaim := nodeAndClaim("b", "c6a.large", true)
			c, cClaim := nodeAndClaim("c", "c6a.2xlarge", true)
			w := newWorld(t, "100%", a, aClaim, b, bClaim, c, cClaim,
				boundPod("a-0", "a", "1"), boundPod("b-0", "b", "1"), boundPod("b-1", "b", "100m"), boundPod("c-0", "c", "5"))
			done := w.reconcileUntilTheDeletionWaits()
			for _, o := range tc.arrive {
				if err := w.kube.Create(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			w.drive(func() {
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			events := w.events()
			for _, name := range tc.deleted {
				if nc := w.claim(name); nc != nil && nc.DeletionTimestamp == nil {
					t.Errorf("candidate %s was not deleted; events:\n%s", name, events)
				}
			}
			for _, name := range tc.kept {
				w.released(name, 0)
			}
			blocked := 0
			for _, e := range strings.Split(events, "\n") {
				if strings.Contains(e, "DisruptionBlocked disruption abandoned: ") && strings.Contains(e, tc.want) {
					blocked++
				}
			}
			if tc.want != "" && blocked != len(tc.kept) {
				t.Errorf("%d DisruptionBlocked event(s) with %q, want one for each of %v:\n%s", blocked, tc.want, tc.kept, events)
			}
		})
	}
}

// TestRestartMidReplacement: a controller that stopped while a command
// waited for its replacement finds, at start, the candidate it tainted and
// the replacement it launched. The candidate is released; the replacement
// is deleted unless pods run on it, and one whose candidate went is kept.
func TestRestartMidReplacement(t *testing.T) {
	for _, tc := range []struct {
		name          string
		candidateGone bool
		// otherGone: the command had a second candidate, which went.
		otherGone bool
		busy      bool
		wantKept  bool
	}{
		{name: "the candidate stayed, nothing runs on the replacement: deleted"},
		{name: "the candidate stayed, a pod landed on the replacement: kept", busy: true, wantKept: true},
		{name: "the candidate went: the replacement is an ordinary NodeClaim", candidateGone: true, wantKept: true},
		{name: "one of two candidates went: its pods need the replacement, kept", otherGone: true, wantKept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if !tc.candidateGone {
				node, nc := nodeAndClaim("old", "c6a.2xlarge", true)
				node.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
				nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
					Reason: string(v1.DisruptionReasonUnderutilized), LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))})
				objs = append(objs, node, nc, boundPod("inflate-0", "old", "1"))
			}
			rnode, repl := nodeAndClaim("repl", "c6a.large", true)
			repl.Annotations = map[string]string{v1.AnnotationReplacing: "old"}
			if tc.otherGone {
				repl.Annotations[v1.AnnotationReplacing] = "old,gone"
			}
			objs = append(objs, rnode, repl)
			if tc.busy {
				objs = append(objs, boundPod("landed", "repl", "100m"))
			}
			w := newWorld(t, "100%", objs...)
			if err := w.c.releaseStale(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !tc.candidateGone && w.tainted("old") {
				t.Error("the candidate is still tainted")
			}
			got := w.claim("repl")
			kept := got != nil && got.DeletionTimestamp == nil
			if kept != tc.wantKept {
				t.Fatalf("replacement kept %t, want %t", kept, tc.wantKept)
			}
			if kept {
				if _, ok := got.Annotations[v1.AnnotationReplacing]; ok {
					t.Errorf("the kept replacement still says it is replacing: %v", got.Annotations)
				}
			}
		})
	}
}

// TestConsolidationType: the label Karpenter's dashboard groups decisions by.
func TestConsolidationType(t *testing.T) {
	one := []disruption.Candidate{{Node: "a"}}
	two := []disruption.Candidate{{Node: "a"}, {Node: "b"}}
	tests := []struct {
		cmd  disruption.Command
		want string
	}{
		{disruption.Command{Reason: v1.DisruptionReasonEmpty, Candidates: two}, "empty"},
		{disruption.Command{Reason: v1.DisruptionReasonUnderutilized, Candidates: one}, "single"},
		{disruption.Command{Reason: v1.DisruptionReasonUnderutilized, Candidates: two}, "multi"},
		{disruption.Command{Reason: v1.DisruptionReasonDrifted, Candidates: one}, ""},
	}
	for _, tt := range tests {
		if got := consolidationType(tt.cmd); got != tt.want {
			t.Errorf("%s with %d candidates: %q, want %q", tt.cmd.Reason, len(tt.cmd.Candidates), got, tt.want)
		}
	}
}

// TestDecisionsWaitForThePlanSlot: while the provisioner plans, disruption
// waits, and decides nothing if its context ends first.
func TestDecisionsWaitForThePlanSlot(t *testing.T) {
	w := newWorld(t, "100%", replaceable()...)
	held, err := w.c.Cluster.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := w.c.Reconcile(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a decision while the slot was held: %v, want context.DeadlineExceeded", err)
	}
	if w.tainted("old") || len(w.taintedAtLaunch) != 0 {
		t.Fatal("disruption acted while the slot was held")
	}
	held()
	if err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if len(w.taintedAtLaunch) != 1 {
		t.Fatalf("%d replacement(s) launched once the slot was free, want 1", len(w.taintedAtLaunch))
	}
}

// TestEachPassReleasesWhatWasLeftMarked: a node left tainted, with its
// NodeClaim's DisruptionReason, by a run that crashed or by a command whose
// release failed is released by the next pass, not only at start: a
// 153-node command's release once ran out of time against a busy API
// server and left its nodes unschedulable.
func TestEachPassReleasesWhatWasLeftMarked(t *testing.T) {
	boom := errors.New("injected")
	for _, tc := range []struct {
		name string
		// failedPasses fail every node patch, before the pass that succeeds.
		failedPasses int
	}{
		{name: "left marked"},
		{name: "the first release fails too", failedPasses: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, nc := nodeAndClaim("old", "c6a.2xlarge", true)
			node.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
				Reason: string(v1.DisruptionReasonUnderutilized), LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))})
			// A budget of none: the passes release and decide nothing.
			w := newWorld(t, "0", node, nc, boundPod("inflate-0", "old", "1"))
			for range tc.failedPasses {
				w.fail = func(op string, obj client.Object) error {
					if _, ok := obj.(*corev1.Node); ok && op == "patch" {
						return boom
					}
					return nil
				}
				_ = w.reconcile()
				if !w.tainted("old") {
					t.Fatal("released although every node patch failed")
				}
			}
			w.releasedByAPassWithoutFaults("old", 0)
		})
	}
}
