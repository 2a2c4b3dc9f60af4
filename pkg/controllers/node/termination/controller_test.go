package termination_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/node/termination"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	nodeName   = "node-1"
	claimName  = "default-abc"
	providerID = "fake:///zone-a/i-1"
)

var now = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// fakeCloud is a cloud whose Delete starts a termination that the next
// Delete reports done, as a real cloud's instance goes through shutting-down.
type fakeCloud struct {
	journal     *[]string
	deleteErr   error
	terminating map[string]bool
	// gone: Get finds no instance.
	gone bool
}

func (f *fakeCloud) Delete(_ context.Context, nc *v1.NodeClaim) error {
	*f.journal = append(*f.journal, "cloud delete "+nc.Status.ProviderID)
	if f.deleteErr != nil {
		return f.deleteErr
	}
	if f.terminating[nc.Status.ProviderID] {
		return &cloudprovider.NodeClaimNotFoundError{ProviderID: nc.Status.ProviderID}
	}
	f.terminating[nc.Status.ProviderID] = true
	return nil
}
func (f *fakeCloud) Create(context.Context, *v1.NodeClaim) (*v1.NodeClaim, error) {
	return nil, errors.New("not in this test")
}
func (f *fakeCloud) Get(_ context.Context, id string) (*v1.NodeClaim, error) {
	*f.journal = append(*f.journal, "cloud get "+id)
	if f.gone {
		return nil, &cloudprovider.NodeClaimNotFoundError{ProviderID: id}
	}
	return &v1.NodeClaim{Status: v1.NodeClaimStatus{ProviderID: id}}, nil
}
func (f *fakeCloud) List(context.Context) ([]*v1.NodeClaim, error) { return nil, nil }
func (f *fakeCloud) InstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return nil, nil
}
func (f *fakeCloud) IsDrifted(context.Context, *v1.NodeClaim) (string, error) { return "", nil }
func (f *fakeCloud) Name() string                                             { return "fake" }

// env is both finalizers' controllers on one fake API server, with a
// journal of what they did there and in the cloud, in order.
type env struct {
	kube    client.Client
	cloud   *fakeCloud
	clock   *clocktesting.FakeClock
	events  *record.FakeRecorder
	term    *termination.Controller
	life    *lifecycle.Controller
	journal []string
}

// newEnv starts the fake API server with objs. funcs, when given, run
// before the journal's own interceptors.
func newEnv(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *env {
	t.Helper()
	e := &env{clock: clocktesting.NewFakeClock(now), events: record.NewFakeRecorder(1000)}
	e.cloud = &fakeCloud{journal: &e.journal, terminating: map[string]bool{}}
	nodeNameOf := func(o client.Object) []string {
		switch o := o.(type) {
		case *corev1.Pod:
			return []string{o.Spec.NodeName}
		case *storagev1.VolumeAttachment:
			return []string{o.Spec.NodeName}
		}
		return nil
	}
	base := fake.NewClientBuilder().WithScheme(operator.Scheme()).
		WithStatusSubresource(&v1.NodeClaim{}, &corev1.Node{}, &corev1.Pod{}).
		WithIndex(&corev1.Pod{}, termination.NodeNameIndex, nodeNameOf).
		WithIndex(&storagev1.VolumeAttachment{}, termination.NodeNameIndex, nodeNameOf).
		WithIndex(&v1.NodeClaim{}, lifecycle.ProviderIDIndex, func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Status.ProviderID} }).
		WithIndex(&corev1.Node{}, lifecycle.ProviderIDIndex, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		WithObjects(objs...).Build()
	kind := func(o client.Object) string { return strings.TrimPrefix(fmt.Sprintf("%T", o), "*v1.") }
	journaled := interceptor.NewClient(base, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			err := c.Delete(ctx, obj, opts...)
			if err == nil {
				e.journal = append(e.journal, "delete "+kind(obj)+" "+obj.GetName())
			}
			return err
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			had := controllerutil.ContainsFinalizer(obj, v1.TerminationFinalizer)
			before := obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), before); err == nil {
				had = controllerutil.ContainsFinalizer(before, v1.TerminationFinalizer)
			}
			err := c.Patch(ctx, obj, patch, opts...)
			if err == nil && had && !controllerutil.ContainsFinalizer(obj, v1.TerminationFinalizer) {
				e.journal = append(e.journal, "release "+kind(obj)+" "+obj.GetName())
			}
			return err
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			err := c.SubResource(sub).Create(ctx, obj, subObj, opts...)
			if err == nil && sub == "eviction" {
				e.journal = append(e.journal, "evict "+obj.GetName())
			}
			return err
		},
	})
	e.kube = interceptor.NewClient(journaled, funcs)
	e.term = &termination.Controller{Client: e.kube, CloudProvider: e.cloud, Recorder: e.events, Clock: e.clock}
	e.life = &lifecycle.Controller{Client: e.kube, Reader: e.kube, CloudProvider: e.cloud, Recorder: e.events, Clock: e.clock,
		LaunchTTL: time.Minute, RegistrationTTL: time.Minute}
	return e
}

func (e *env) terminate(t *testing.T) (reconcile.Result, error) {
	t.Helper()
	return e.term.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: nodeName}})
}

func (e *env) finalize(t *testing.T) (reconcile.Result, error) {
	t.Helper()
	return e.life.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: claimName}})
}

// mustTerminate reconciles the node once and fails on an error.
func (e *env) mustTerminate(t *testing.T) reconcile.Result {
	t.Helper()
	res, err := e.terminate(t)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// deleteObj deletes an object as a user would, outside the journal's order.
func (e *env) deleteObj(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.kube.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func (e *env) exists(obj client.Object) bool {
	return e.kube.Get(context.Background(), client.ObjectKeyFromObject(obj), obj) == nil
}

func (e *env) claim(t *testing.T) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := e.kube.Get(context.Background(), types.NamespacedName{Name: claimName}, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

func (e *env) condition(t *testing.T, kind string) string {
	t.Helper()
	if c := meta.FindStatusCondition(e.claim(t).Status.Conditions, kind); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return "absent"
}

// drainEvents returns the events recorded so far.
func (e *env) drainEvents() []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// compact drops repeated journal entries: how often a step polls is not
// what is tested, the order of the steps is.
func compact(journal []string) []string { return slices.Compact(slices.Clone(journal)) }

func newNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Finalizers: []string{v1.TerminationFinalizer}},
		Spec:   corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func newClaim(annotations map[string]string) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName, Labels: map[string]string{v1.LabelNodePool: "default"},
		Annotations: annotations, Finalizers: []string{v1.TerminationFinalizer}}}
	nc.Status.ProviderID = providerID
	nc.Status.NodeName = nodeName
	for _, t := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized} {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, LastTransitionTime: metav1.NewTime(now)})
	}
	return nc
}

type podOption func(*corev1.Pod)

func newPod(name, cpu string, opts ...podOption) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func critical(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }
func daemon(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds"}}
}
func mirror(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }
func tolerating(p *corev1.Pod) {
	p.Spec.Tolerations = []corev1.Toleration{{Key: v1.DisruptedNoScheduleTaint.Key, Operator: corev1.TolerationOpExists}}
}
func doNotDisrupt(p *corev1.Pod) {
	p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
}

// terminatingFor is a pod being deleted whose grace period ends in d (ended
// -d ago when negative).
func terminatingFor(d time.Duration) podOption {
	return func(p *corev1.Pod) {
		p.Finalizers = []string{"test/keep"} // the fake API server keeps it
		p.DeletionTimestamp = &metav1.Time{Time: now.Add(d)}
	}
}
func doNotDisruptFor(value string, startedAgo time.Duration) podOption {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: value}
		p.Status.StartTime = &metav1.Time{Time: now.Add(-startedAgo)}
	}
}
func claiming(claim string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}
func ephemeralVolume(p *corev1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch",
		VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
}

func pvc(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
}

func attachment(name, node, pv string) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: node}}
	if pv != "" {
		va.Spec.Source.PersistentVolumeName = &pv
	} else {
		va.Spec.Source.InlineVolumeSpec = &corev1.PersistentVolumeSpec{}
	}
	return va
}

// TestNodeFinalizerOrder follows a node's termination step by step: the
// NodeClaim is deleted, ordinary pods are evicted before DaemonSet pods and
// those before critical ones; the instance is not deleted while a drained
// pod's volume is attached, and the finalizer goes only once the instance
// has.
func TestNodeFinalizerOrder(t *testing.T) {
	e := newEnv(t, interceptor.Funcs{}, newNode(), newClaim(nil),
		newPod("web", "1", claiming("web-data")), newPod("dns", "100m", critical), newPod("agent", "100m", daemon, claiming("agent-data")),
		pvc("web-data", "pv-web"), pvc("agent-data", "pv-agent"),
		attachment("va-web", nodeName, "pv-web"), attachment("va-agent", nodeName, "pv-agent"))
	e.deleteObj(t, newNode())
	e.journal = nil

	e.mustTerminate(t)
	if got, want := compact(e.journal), []string{"delete NodeClaim " + claimName, "evict web"}; !slices.Equal(got, want) {
		t.Fatalf("first pass %v, want %v: the critical pod waits for the others", got, want)
	}
	node := newNode()
	if e.exists(node); !taints.Has(node.Spec.Taints, v1.DisruptedNoScheduleTaint) {
		t.Errorf("node not tainted: %v", node.Spec.Taints)
	}
	if got := e.condition(t, v1.ConditionTypeDrained); got != "Unknown/Draining" {
		t.Errorf("Drained %s during the drain", got)
	}

	e.journal = nil
	e.mustTerminate(t)
	if got, want := compact(e.journal), []string{"evict agent"}; !slices.Equal(got, want) {
		t.Fatalf("second pass %v, want %v: DaemonSet pods after the others, before critical ones", got, want)
	}

	e.journal = nil
	e.mustTerminate(t)
	if got, want := compact(e.journal), []string{"evict dns"}; !slices.Equal(got, want) {
		t.Fatalf("third pass %v, want %v", got, want)
	}

	e.journal = nil
	e.mustTerminate(t)
	e.mustTerminate(t)
	if len(e.journal) != 0 {
		t.Fatalf("did %v while the drained pod's volume is attached", e.journal)
	}
	if got := e.condition(t, v1.ConditionTypeDrained); got != "True/Drained" {
		t.Errorf("Drained %s after the drain", got)
	}
	if got := e.condition(t, v1.ConditionTypeVolumesDetached); got != "Unknown/AwaitingVolumeDetachment" {
		t.Errorf("VolumesDetached %s while va-web is attached", got)
	}
	if evs := e.drainEvents(); !slices.ContainsFunc(evs, func(s string) bool {
		return strings.Contains(s, "AwaitingVolumeDetachment") && strings.Contains(s, "va-web")
	}) {
		t.Errorf("no AwaitingVolumeDetachment event naming va-web: %v", evs)
	}

	e.deleteObj(t, attachment("va-web", nodeName, "pv-web"))
	e.journal = nil
	e.mustTerminate(t)
	if len(e.journal) != 0 {
		t.Fatalf("did %v while the drained DaemonSet pod's volume is attached", e.journal)
	}
	e.deleteObj(t, attachment("va-agent", nodeName, "pv-agent"))
	e.journal = nil
	e.mustTerminate(t)
	if got, want := compact(e.journal), []string{"cloud delete " + providerID}; !slices.Equal(got, want) {
		t.Fatalf("after the detach %v, want %v", got, want)
	}
	if got := e.condition(t, v1.ConditionTypeVolumesDetached); got != "True/VolumesDetached" {
		t.Errorf("VolumesDetached %s", got)
	}
	if got := e.condition(t, v1.ConditionTypeInstanceTerminating); got != "True/InstanceTerminating" {
		t.Errorf("InstanceTerminating %s while the instance terminates", got)
	}
	e.journal = nil
	e.mustTerminate(t)
	if got, want := compact(e.journal), []string{"cloud delete " + providerID, "release Node " + nodeName}; !slices.Equal(got, want) {
		t.Fatalf("once the instance is gone %v, want %v", got, want)
	}
}

// TestNodeClaimFinalizerOrder deletes a NodeClaim and runs both finalizers:
// the Node goes first (drained by its own finalizer), then the instance,
// and only then the NodeClaim.
func TestNodeClaimFinalizerOrder(t *testing.T) {
	e := newEnv(t, interceptor.Funcs{}, newNode(), newClaim(nil))
	e.deleteObj(t, newClaim(nil))
	e.journal = nil
	for range 2 {
		if _, err := e.finalize(t); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := compact(e.journal), []string{"delete Node " + nodeName}; !slices.Equal(got, want) {
		t.Fatalf("while the node is there the NodeClaim finalizer did %v, want %v", got, want)
	}
	for i := 0; e.exists(newNode()); i++ {
		if i == 5 {
			t.Fatal("node still there after 5 passes")
		}
		e.mustTerminate(t)
	}
	if !controllerutil.ContainsFinalizer(e.claim(t), v1.TerminationFinalizer) {
		t.Fatal("the NodeClaim let go before its finalizer ran")
	}
	for i := 0; e.exists(newClaim(nil)); i++ {
		if i == 5 {
			t.Fatal("NodeClaim still there after 5 passes")
		}
		if _, err := e.finalize(t); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"delete Node " + nodeName, "cloud delete " + providerID, "release Node " + nodeName, "cloud delete " + providerID, "release NodeClaim " + claimName}
	if got := compact(e.journal); !slices.Equal(got, want) {
		t.Fatalf("journal %v, want %v", got, want)
	}
}

// TestNodeClaimFinalizerWaitsForInstance has the node gone already: the
// NodeClaim keeps its finalizer while the instance terminates.
func TestNodeClaimFinalizerWaitsForInstance(t *testing.T) {
	e := newEnv(t, interceptor.Funcs{}, newClaim(nil))
	e.deleteObj(t, newClaim(nil))
	e.journal = nil
	res, err := e.finalize(t)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("first pass: %v %v, want a requeue while the instance terminates", res, err)
	}
	if got := e.condition(t, v1.ConditionTypeInstanceTerminating); got != "True/InstanceTerminating" {
		t.Errorf("InstanceTerminating %s", got)
	}
	if _, err := e.finalize(t); err != nil {
		t.Fatal(err)
	}
	if e.exists(newClaim(nil)) {
		t.Fatal("NodeClaim still there after its instance went")
	}
	want := []string{"cloud delete " + providerID, "release NodeClaim " + claimName}
	if got := compact(e.journal); !slices.Equal(got, want) {
		t.Fatalf("journal %v, want %v", got, want)
	}
}

// TestDrainOrder checks who is evicted in each pass: ordinary pods largest
// first, then DaemonSet pods, then critical pods, then critical DaemonSet
// pods, each group once the ones before are gone; mirror pods and pods
// tolerating the disrupted taint never.
func TestDrainOrder(t *testing.T) {
	cases := []struct {
		name   string
		pods   []*corev1.Pod
		passes [][]string
	}{
		{name: "ordinary pods first, then critical ones, never node-owned ones",
			pods: []*corev1.Pod{newPod("small", "100m"), newPod("big", "2"), newPod("dns", "4", critical), newPod("proxy", "100m", critical),
				newPod("agent", "8", daemon), newPod("static", "8", mirror), newPod("stays", "8", tolerating)},
			passes: [][]string{{"evict big", "evict small"}, {"evict agent"}, {"evict dns", "evict proxy"}, nil}},
		{name: "Karpenter's four groups: others, DaemonSet pods, critical pods, critical DaemonSet pods",
			pods:   []*corev1.Pod{newPod("cni", "1", critical, daemon), newPod("dns", "1", critical), newPod("agent", "1", daemon), newPod("web", "1")},
			passes: [][]string{{"evict web"}, {"evict agent"}, {"evict dns"}, {"evict cni"}, nil}},
		{name: "critical pods alone go at once", pods: []*corev1.Pod{newPod("proxy", "100m", critical), newPod("dns", "1", critical)},
			passes: [][]string{{"evict dns", "evict proxy"}, nil}},
		{name: "a do-not-disrupt pod holds the critical pods", pods: []*corev1.Pod{newPod("pinned", "1", doNotDisrupt), newPod("dns", "1", critical)},
			passes: [][]string{nil, nil}},
		{name: "a pod still terminating holds the next group", pods: []*corev1.Pod{newPod("web", "1", terminatingFor(30*time.Second)), newPod("agent", "1", daemon)},
			passes: [][]string{nil, nil}},
		{name: "a pod stuck terminating (a dead kubelet) is not waited for", pods: []*corev1.Pod{newPod("web", "1", terminatingFor(-2*time.Minute)), newPod("agent", "1", daemon)},
			passes: [][]string{{"evict agent"}, nil}},
		{name: "a 30m do-not-disrupt pod that started 31 minutes ago is evicted", pods: []*corev1.Pod{newPod("batch", "1", doNotDisruptFor("30m", 31*time.Minute))},
			passes: [][]string{{"evict batch"}, nil}},
		{name: "a 30m do-not-disrupt pod that started 29 minutes ago is not", pods: []*corev1.Pod{newPod("batch", "1", doNotDisruptFor("30m", 29*time.Minute))},
			passes: [][]string{nil, nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{newNode(), newClaim(nil)}
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			e := newEnv(t, interceptor.Funcs{}, objs...)
			e.deleteObj(t, newNode())
			for i, want := range tc.passes {
				e.journal = nil
				e.mustTerminate(t)
				var got []string
				for _, j := range e.journal {
					if strings.HasPrefix(j, "evict ") {
						got = append(got, j)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("pass %d evicted %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

// TestVolumeAttachments checks which attachments hold the instance: those
// whose volume a drained pod used or no pod uses, not those of pods that
// stay with the node, of inline volumes or of other nodes.
func TestVolumeAttachments(t *testing.T) {
	cases := []struct {
		name  string
		objs  []client.Object
		waits bool
	}{
		{name: "a drained pod's volume", objs: []client.Object{newPod("web", "1", claiming("data")), pvc("data", "pv-1"), attachment("va", nodeName, "pv-1")}, waits: true},
		{name: "a volume no pod uses", objs: []client.Object{attachment("va", nodeName, "pv-1")}, waits: true},
		{name: "a DaemonSet pod's volume: it is drained too", objs: []client.Object{newPod("agent", "1", daemon, claiming("data")), pvc("data", "pv-1"), attachment("va", nodeName, "pv-1")}, waits: true},
		{name: "a pod's volume when the pod is stuck terminating", objs: []client.Object{newPod("web", "1", terminatingFor(-2*time.Minute), claiming("data")), pvc("data", "pv-1"), attachment("va", nodeName, "pv-1")}},
		{name: "a mirror pod's volume", objs: []client.Object{newPod("static", "1", mirror, claiming("data")), pvc("data", "pv-1"), attachment("va", nodeName, "pv-1")}},
		{name: "the volume of a pod tolerating the disrupted taint", objs: []client.Object{newPod("stays", "1", tolerating, claiming("data")), pvc("data", "pv-1"), attachment("va", nodeName, "pv-1")}},
		{name: "a DaemonSet pod's ephemeral volume", objs: []client.Object{newPod("agent", "1", daemon, ephemeralVolume), pvc("agent-scratch", "pv-1"), attachment("va", nodeName, "pv-1")}, waits: true},
		{name: "an inline volume", objs: []client.Object{attachment("va", nodeName, "")}},
		{name: "another node's volume", objs: []client.Object{attachment("va", "node-2", "pv-1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, interceptor.Funcs{}, append([]client.Object{newNode(), newClaim(nil)}, tc.objs...)...)
			e.deleteObj(t, newNode())
			for range 5 {
				e.mustTerminate(t)
			}
			cloudCalled := slices.ContainsFunc(e.journal, func(s string) bool { return strings.HasPrefix(s, "cloud delete") })
			if tc.waits {
				if cloudCalled || !e.exists(newNode()) {
					t.Fatalf("the instance went with the volume attached: %v", e.journal)
				}
				if got := e.condition(t, v1.ConditionTypeVolumesDetached); got != "Unknown/AwaitingVolumeDetachment" {
					t.Errorf("VolumesDetached %s", got)
				}
				return
			}
			if e.exists(newNode()) {
				t.Fatalf("the node is held: %v, VolumesDetached %s", e.journal, e.condition(t, v1.ConditionTypeVolumesDetached))
			}
			if got := e.condition(t, v1.ConditionTypeVolumesDetached); got != "True/VolumesDetached" {
				t.Errorf("VolumesDetached %s", got)
			}
		})
	}
}

// A node with nothing to evict counts as drained only once it has been
// draining for MinDrainTime, as Karpenter waits: kube-scheduler may bind a
// pod before it sees the taint.
func TestMinDrainTime(t *testing.T) {
	e := newEnv(t, interceptor.Funcs{}, newNode(), newClaim(nil))
	e.term.MinDrain = termination.MinDrainTime
	e.deleteObj(t, newNode())
	e.journal = nil
	for _, step := range []struct {
		after time.Duration
		want  string
	}{
		{0, "Unknown/Draining"},
		{4 * time.Second, "Unknown/Draining"},
		{time.Second, "True/Drained"},
	} {
		e.clock.Step(step.after)
		e.mustTerminate(t)
		if got := e.condition(t, v1.ConditionTypeDrained); got != step.want {
			t.Fatalf("Drained %s after %s more, want %s", got, step.after, step.want)
		}
		if step.want != "True/Drained" && slices.Contains(compact(e.journal), "cloud delete "+providerID) {
			t.Fatalf("the instance was deleted before the node counted as drained: %v", e.journal)
		}
	}
}
