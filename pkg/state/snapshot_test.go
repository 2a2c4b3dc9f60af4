package state_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/kwok"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestSnapshotForDaemonSetsAndNamespaces checks what the snapshot gives
// the scheduling core about capacity not yet up and about namespaces:
// namespace labels for namespaceSelectors; for a NodeClaim not launched
// yet, the labels all its options share (DaemonSets select
// kubernetes.io/os); for a node not yet initialized, its taints without the
// startup taints, which go away.
func TestSnapshotForDaemonSetsAndNamespaces(t *testing.T) {
	scheme := operator.Scheme()
	startup := corev1.Taint{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	dedicated := corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}
	pool, class := readyPool()
	options := v1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c6a.large", "c6a.xlarge"}}
	unlaunched := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "unlaunched", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: v1.NodeClaimSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{options}}}
	booting := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "booting", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec:   v1.NodeClaimSpec{StartupTaints: []corev1.Taint{startup}, Taints: []corev1.Taint{dedicated}},
		Status: v1.NodeClaimStatus{ProviderID: "kwok://booting", NodeName: "booting"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "booting", Labels: map[string]string{corev1.LabelHostname: "booting"}},
		Spec: corev1.NodeSpec{ProviderID: "kwok://booting", Taints: []corev1.Taint{startup, dedicated}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"team": "data"}}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool, class, unlaunched, booting, node, ns).WithStatusSubresource(&v1.NodeClaim{}, &awsv1.EC2NodeClass{}).Build()
	provider, err := kwok.New(kube, kwok.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, problems, err := (&state.Cluster{Client: kube, CloudProvider: provider}).Snapshot(context.Background(), nil)
	if err != nil || len(problems) > 0 {
		t.Fatalf("snapshot: %v %v", err, problems)
	}
	if snap.Namespaces["data"]["team"] != "data" {
		t.Errorf("namespaces %v", snap.Namespaces)
	}
	byName := map[string]*scheduling.Node{}
	for _, n := range snap.Nodes {
		byName[n.Name] = n
	}
	u := byName["nodeclaim/unlaunched"]
	if u == nil {
		t.Fatalf("no in-flight node for the unlaunched NodeClaim among %v", byName)
	}
	for k, want := range map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", "karpenter.k8s.aws/instance-family": "c6a"} {
		if got := u.Labels[k]; got != want {
			t.Errorf("unlaunched NodeClaim's label %s = %q, want %q", k, got, want)
		}
	}
	if got, ok := u.Labels[corev1.LabelInstanceTypeStable]; ok {
		t.Errorf("unlaunched NodeClaim has instance type %q; its options differ", got)
	}
	b := byName["booting"]
	if b == nil || !b.InFlight {
		t.Fatalf("booting node %+v, want in flight", b)
	}
	if len(b.Taints) != 1 || !b.Taints[0].MatchTaint(&dedicated) {
		t.Errorf("booting node's taints %v, want only %v", b.Taints, dedicated)
	}
}

// TestSnapshotLeavesOutPodsBoundSinceListed: the provisioner lists pending
// pods before the snapshot lists the cluster, and kube-scheduler may bind
// some in between. A pod the snapshot finds bound is counted on its node,
// not planned again.
func TestSnapshotLeavesOutPodsBoundSinceListed(t *testing.T) {
	scheme := operator.Scheme()
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "kwok://n1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	// As the cluster is now: "bound" has a node; "waiting" still waits.
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, pod("bound", "n1"), pod("waiting", "")).Build()
	provider, err := kwok.New(kube, kwok.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// As the provisioner listed them a moment before: both pending.
	listed := []*corev1.Pod{pod("bound", ""), pod("waiting", "")}
	snap, _, err := (&state.Cluster{Client: kube, CloudProvider: provider}).Snapshot(context.Background(), listed)
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	for _, p := range snap.Pods {
		pending = append(pending, p.Name)
	}
	if len(pending) != 1 || pending[0] != "waiting" {
		t.Errorf("pending pods %v, want [waiting]", pending)
	}
	for _, n := range snap.Nodes {
		if n.Name == "n1" && (len(n.Pods) != 1 || n.Pods[0].Name != "bound") {
			t.Errorf("pods on n1: %d, want the bound one", len(n.Pods))
		}
	}
}

// TestSnapshotCountsUnlaunchedClaimsAgainstLimits: a NodeClaim not launched
// yet counts against its pool's limits as the smallest of its instance
// types, not as its pods' requests, so that the next batch does not spend
// the rest of that node's capacity again.
func TestSnapshotCountsUnlaunchedClaimsAgainstLimits(t *testing.T) {
	scheme := operator.Scheme()
	pool, class := readyPool()
	claim := func(name string, types ...string) *v1.NodeClaim {
		return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "default"}},
			Spec: v1.NodeClaimSpec{
				Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types}},
				Resources:    v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	}
	cases := []struct {
		name    string
		claim   *v1.NodeClaim
		wantCPU string
	}{
		{"one option", claim("a", "c6a.xlarge"), "4"},
		{"the smallest of its options", claim("b", "c6a.2xlarge", "c6a.large", "c6a.xlarge"), "2"},
		{"no known option: its requests", claim("c", "no-such-type"), "500m"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool.DeepCopy(), class.DeepCopy(), c.claim).WithStatusSubresource(&v1.NodeClaim{}, &awsv1.EC2NodeClass{}).Build()
			provider, err := kwok.New(kube, kwok.Options{})
			if err != nil {
				t.Fatal(err)
			}
			snap, _, err := (&state.Cluster{Client: kube, CloudProvider: provider}).Snapshot(context.Background(), nil)
			if err != nil || len(snap.NodePools) != 1 {
				t.Fatalf("snapshot: %v, %d pools", err, len(snap.NodePools))
			}
			got := snap.NodePools[0].InUse[corev1.ResourceCPU]
			if want := resource.MustParse(c.wantCPU); got.Cmp(want) != 0 {
				t.Errorf("in use %s CPU, want %s", got.String(), want.String())
			}
		})
	}
}

// TestSnapshotCountsCreatedClaimsTheCacheLacks: a NodeClaim this process
// created counts in the next snapshot (an in-flight node, its pool's
// usage) while the cache has not held it, once when the cache holds it,
// and not after RememberFor nor once the cache has held it and seen it
// deleted: a lagging cache must not make the next batch plan the same pods
// again, and a deleted claim must not count as capacity.
func TestSnapshotCountsCreatedClaimsTheCacheLacks(t *testing.T) {
	scheme := operator.Scheme()
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	pool, class := readyPool()
	made := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "made", Labels: map[string]string{v1.LabelNodePool: "default"}, CreationTimestamp: metav1.NewTime(now)},
		Spec: v1.NodeClaimSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c6a.xlarge"}}}}}
	cases := []struct {
		name    string
		inCache bool
		// seenDeleted: the informer held the claim and saw it deleted
		// before any snapshot listed it.
		seenDeleted bool
		after       time.Duration
		wantNodes   int
	}{
		{"not in the cache yet", false, false, time.Second, 1},
		{"in the cache", true, false, time.Second, 1},
		{"never in the cache, past RememberFor", false, false, state.RememberFor + time.Second, 0},
		{"held by the cache and deleted before a snapshot", false, true, time.Second, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := []client.Object{pool.DeepCopy(), class.DeepCopy()}
			if c.inCache {
				objs = append(objs, made.DeepCopy())
			}
			kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1.NodeClaim{}, &awsv1.EC2NodeClass{}).Build()
			provider, err := kwok.New(kube, kwok.Options{})
			if err != nil {
				t.Fatal(err)
			}
			clk := clocktesting.NewFakeClock(now)
			cluster := &state.Cluster{Client: kube, CloudProvider: provider, Clock: clk}
			cluster.Remember(context.Background(), made)
			if c.seenDeleted {
				cluster.Seen().OnAdd(made.DeepCopy(), false)
				cluster.Seen().OnDelete(made.DeepCopy())
			}
			clk.Step(c.after)
			snap, _, err := cluster.Snapshot(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			inFlight := 0
			for _, n := range snap.Nodes {
				if n.Name == state.InFlightName("made") {
					inFlight++
				}
			}
			if inFlight != c.wantNodes {
				t.Errorf("%d in-flight nodes for the created NodeClaim, want %d", inFlight, c.wantNodes)
			}
			cpu := snap.NodePools[0].InUse[corev1.ResourceCPU]
			if want := int64(4 * c.wantNodes); cpu.Value() != want {
				t.Errorf("pool usage %s CPU, want %d", cpu.String(), want)
			}
		})
	}
}

// TestSnapshotInFlightClaims: a NodeClaim is capacity on its way only
// while no node of it has registered, whether the node is found by the
// claim's status.nodeName or, before the lifecycle controller has written
// that, by its providerID; counted as both, its room would be planned
// twice.
func TestSnapshotInFlightClaims(t *testing.T) {
	scheme := operator.Scheme()
	pool, class := readyPool()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "kwok://n1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	cases := []struct {
		name                 string
		providerID, nodeName string
		inFlight             bool
	}{
		{name: "not launched", inFlight: true},
		{name: "launched, its node not registered", providerID: "kwok://n2", inFlight: true},
		{name: "its node registered, found by providerID", providerID: "kwok://n1"},
		{name: "its node registered, found by name", providerID: "kwok://n1", nodeName: "n1"},
	}
	// The provisioner nominated p for the claim, r for the node n1 and q
	// for a claim since gone; the snapshot names each where the plan
	// finds it, the claim's node once it has one.
	var pending []*corev1.Pod
	for _, name := range []string{"p", "q", "r"} {
		pending = append(pending, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Labels: map[string]string{v1.LabelNodePool: "default"}},
				Spec:   v1.NodeClaimSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c6a.xlarge"}}}},
				Status: v1.NodeClaimStatus{ProviderID: c.providerID, NodeName: c.nodeName}}
			kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool.DeepCopy(), class.DeepCopy(), node.DeepCopy(), claim).
				WithStatusSubresource(&v1.NodeClaim{}, &awsv1.EC2NodeClass{}).Build()
			provider, err := kwok.New(kube, kwok.Options{})
			if err != nil {
				t.Fatal(err)
			}
			fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			nominations := &state.Nominations{Clock: fc, Window: 20 * time.Second}
			nominations.NominateNodeClaim("claim", pending[0])
			nominations.NominateNodeClaim("gone", pending[1])
			nominations.NominateNode("n1", pending[2])
			snap, _, err := (&state.Cluster{Client: kube, CloudProvider: provider, Nominations: nominations}).Snapshot(context.Background(), pending)
			if err != nil {
				t.Fatal(err)
			}
			inFlight := false
			for _, n := range snap.Nodes {
				inFlight = inFlight || n.Name == state.InFlightName("claim")
			}
			if inFlight != c.inFlight {
				t.Errorf("in flight %t, want %t", inFlight, c.inFlight)
			}
			want := map[string]string{"default/p": "n1", "default/r": "n1"}
			if c.inFlight {
				want["default/p"] = state.InFlightName("claim")
			}
			if !reflect.DeepEqual(snap.Nominated, want) {
				t.Errorf("nominated %v, want %v", snap.Nominated, want)
			}
		})
	}
}

// readyPool is the NodePool "default" and its Ready EC2NodeClass "default".
func readyPool() (*v1.NodePool, *awsv1.EC2NodeClass) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}}}}}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	class.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	return pool, class
}
