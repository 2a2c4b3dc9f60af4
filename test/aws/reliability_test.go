//go:build reliability

package aws

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The acceptance of issue 18, tried as a user would (make reliability):
// each test is one of its points, on the local control plane with the aws
// provider. docs/reliability.md has the figures they log.

// TestCapacityShortageNoChurn: guide 03 is scaled from 5 pods to 1 while
// the cheapest small types are out of capacity. Consolidation replaces the
// big node with a cheaper one once, and then, however often it tries again
// (each try's launch refused for capacity), never evicts for a replacement
// that costs as much as the node: at most two instances are launched after
// the scale-down.
func TestCapacityShortageNoChurn(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	j := framework.StartJoiner(t, awsEnv("JOINER_TEST_UNAVAILABLE_TTL=20s")...)
	t.Cleanup(func() {
		_ = fake.SetFaults(fakeaws.Faults{})
		framework.ResetCluster(t)
	})
	manifest := strings.Replace(framework.ReadSeed(t, "03-scale-up-down.yaml"), "consolidateAfter: 1m", "consolidateAfter: 5s", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "five inflate pods run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 5, fmt.Sprintf("%d running", n)
	})
	first := framework.NodeClaims(t)[0]
	firstPrice := onDemandPrice(t, first.Labels[corev1.LabelInstanceTypeStable])

	// The shortage: every type of the pool that fits one inflate pod and
	// costs less than the fourth cheapest such type.
	short, fourth := cheapestFitting(t, 4)
	var ice []fakeaws.Capacity
	for _, it := range short {
		ice = append(ice, fakeaws.Capacity{InstanceType: it, CapacityType: "on-demand"})
	}
	if err := fake.SetFaults(fakeaws.Faults{InsufficientCapacity: ice}); err != nil {
		t.Fatal(err)
	}
	launchedBefore := len(launchedInstances())
	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "1")
	framework.Eventually(t, 4*time.Minute, "the big node replaced once", func() (bool, string) {
		claims := framework.NodeClaims(t)
		return len(claims) == 1 && claims[0].Name != first.Name && meta.IsStatusConditionTrue(claims[0].Status.Conditions, v1.ConditionTypeInitialized),
			fmt.Sprintf("%d NodeClaims", len(claims))
	})
	second := framework.NodeClaims(t)[0]
	secondPrice := onDemandPrice(t, second.Labels[corev1.LabelInstanceTypeStable])
	if secondPrice >= firstPrice {
		t.Fatalf("the replacement %s costs $%.4f/h, not less than %s's $%.4f/h", second.Labels[corev1.LabelInstanceTypeStable], secondPrice, first.Labels[corev1.LabelInstanceTypeStable], firstPrice)
	}
	// The positive signal: consolidation goes on trying while the
	// shortage lasts (a replacement refused for capacity, three times),
	// or finds nothing cheaper to launch (its own type is as cheap as it
	// gets while the shorter ones are out).
	refused := func() int { return j.Count("failed launching nodeclaim") }
	skipped := func() int {
		return len(framework.Events(t, "Unconsolidatable", second.Name)) + len(framework.Events(t, "DisruptionBlocked", second.Name))
	}
	framework.Eventually(t, 4*time.Minute, "three more consolidation rounds to weigh the replacement", func() (bool, string) {
		return refused() >= 3 || skipped() >= 3, fmt.Sprintf("%d replacement launches refused, %d skip events", refused(), skipped())
	})
	after := launchedInstances()[launchedBefore:]
	if len(after) > 2 {
		t.Errorf("%d instances launched after the scale-down (%v), want at most 2", len(after), after)
	}
	// No replacement costs as much as the node it replaced.
	for _, nc := range framework.NodeClaims(t) {
		if p := onDemandPrice(t, nc.Labels[corev1.LabelInstanceTypeStable]); nc.Name != second.Name && p >= secondPrice {
			t.Errorf("NodeClaim %s (%s, $%.4f/h) replaced %s at $%.4f/h", nc.Name, nc.Labels[corev1.LabelInstanceTypeStable], p, second.Name, secondPrice)
		}
	}
	t.Logf("shortage of %v (types cheaper than %s): %s ($%.4f/h) replaced by %s ($%.4f/h); then %d replacement launches refused for capacity, %d skip events; %d instances launched after the scale-down",
		short, fourth, first.Labels[corev1.LabelInstanceTypeStable], firstPrice, second.Labels[corev1.LabelInstanceTypeStable], secondPrice, refused(), skipped(), len(after))
}

// cheapestFitting are the on-demand types of guide 03's pool that hold an
// inflate pod (1 CPU, 1.5 GiB) and cost less than the n-th cheapest of them,
// which is returned too.
func cheapestFitting(t testing.TB, n int) ([]string, string) {
	t.Helper()
	its, err := catalog.InstanceTypes(catalog.Options{Region: region})
	if err != nil {
		t.Fatal(err)
	}
	type priced struct {
		name  string
		price float64
	}
	var fit []priced
	for _, it := range its {
		l := it.Labels
		cat := l["karpenter.k8s.aws/instance-category"]
		gen, _ := strconv.Atoi(l["karpenter.k8s.aws/instance-generation"])
		if l[corev1.LabelArchStable] != "amd64" || (cat != "c" && cat != "m" && cat != "r") || gen <= 2 {
			continue
		}
		cpu, mem := it.Allocatable[corev1.ResourceCPU], it.Allocatable[corev1.ResourceMemory]
		if cpu.MilliValue() < 1100 || mem.Value() < 1700<<20 {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == "on-demand" && o.Available {
				fit = append(fit, priced{it.Name, o.Price})
				break
			}
		}
	}
	sort.Slice(fit, func(i, j int) bool {
		return fit[i].price < fit[j].price || fit[i].price == fit[j].price && fit[i].name < fit[j].name
	})
	var out []string
	for _, p := range fit {
		if p.price < fit[n-1].price {
			out = append(out, p.name)
		}
	}
	return out, fit[n-1].name
}

// launchedInstances are the instances the endpoint launched, oldest first.
func launchedInstances() []string {
	var out []string
	for _, c := range launchCalls() {
		out = append(out, c.Instances...)
	}
	return out
}

// TestDoubleLaunchWhenTheWriteFails: the write that records a launch (the
// NodeClaim's status with its provider ID) fails once, right after a
// successful launch. The retry adopts the instance the launch started:
// exactly one instance runs for the NodeClaim, and none without one.
func TestDoubleLaunchWhenTheWriteFails(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	proxy := framework.StartAPIFaults(t, 1)
	proxy.Set(framework.APIFault{Method: http.MethodPatch, Resource: "nodeclaims", Subresource: "status", BodyContains: `"providerID"`, Status: http.StatusInternalServerError, Times: 1})
	j := framework.StartJoiner(t, append(awsEnv(), proxy.Env())...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, guide03OnSmallTypes(t, "Never", 1), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the pod runs", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 1, fmt.Sprintf("%d running; failed writes %v", n, proxy.Failed())
	})
	if len(proxy.Failed()) != 1 {
		t.Fatalf("failed writes %v, want the one that records the launch", proxy.Failed())
	}
	claims := framework.NodeClaims(t)
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims, want 1", len(claims))
	}
	launched := launchedInstances()
	if len(launched) != 1 || instanceID(claims[0].Status.ProviderID) != launched[0] {
		t.Fatalf("instances launched %v for NodeClaim %s with %s, want exactly its one", launched, claims[0].Name, claims[0].Status.ProviderID)
	}
	if j.Count("resuming an unrecorded launch with the instance it started") != 1 {
		t.Fatalf("the retry did not log adopting the instance:\n%s", framework.Decisions(j.Logs()))
	}
	for _, stray := range strayInstances(t) {
		t.Errorf("instance %s without a NodeClaim", stray)
	}
	t.Logf("failed writes %v; %d CreateFleet calls, instances %v", proxy.Failed(), len(fake.Calls("ec2", "CreateFleet")), launched)
}

// TestInstanceTerminatedOutOfBand: the instance of a node running pods is
// terminated from the console. Its kubelet dies with it, so the pods the
// drain evicts never finish terminating; the Node and NodeClaim are gone
// within three minutes all the same, and the Deployment runs elsewhere.
func TestInstanceTerminatedOutOfBand(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifest := strings.Replace(guide03OnSmallTypes(t, "Never", 3), "    spec:\n      containers:", "    spec:\n      terminationGracePeriodSeconds: 600\n      containers:", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "three pods run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 3, fmt.Sprintf("%d running", n)
	})
	victim := framework.NodeClaims(t)[0]
	id := instanceID(victim.Status.ProviderID)
	start := time.Now()
	if _, err := ec2Client(t).TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	var gone time.Duration
	framework.Eventually(t, 3*time.Minute, "the Node and NodeClaim gone, the Deployment running elsewhere", func() (bool, string) {
		node := &corev1.Node{}
		nodeErr := framework.Kube.Get(context.Background(), types.NamespacedName{Name: victim.Status.NodeName}, node)
		for _, nc := range framework.NodeClaims(t) {
			if nc.Name == victim.Name {
				return false, "the NodeClaim is still there: " + framework.Condition(nc, v1.ConditionTypeDrained)
			}
		}
		if nodeErr == nil {
			return false, "the Node is still there"
		}
		if gone == 0 {
			gone = time.Since(start)
		}
		n, byNode := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 3 && byNode[victim.Status.NodeName] == 0, fmt.Sprintf("%d running: %v", n, byNode)
	})
	t.Logf("instance %s terminated out of band: Node and NodeClaim gone after %s, the Deployment fully running elsewhere after %s",
		id, gone.Round(time.Second), time.Since(start).Round(time.Second))
}

// TestKubeletDeathRepaired: the kubelet of a running instance dies
// (fake-aws's admin call). With NodeRepair on, the node is replaced once
// its NotReady outlasts the toleration (shortened here by a test hook from
// Karpenter's 30 minutes), and its instance ends terminated.
func TestKubeletDeathRepaired(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	j := framework.StartJoiner(t, awsEnv("FEATURE_GATES=NodeRepair=true", "JOINER_TEST_REPAIR_TOLERATION=20s")...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, guide03OnSmallTypes(t, "Never", 2), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "two pods run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 2, fmt.Sprintf("%d running", n)
	})
	victim := framework.NodeClaims(t)[0]
	id := instanceID(victim.Status.ProviderID)
	start := time.Now()
	if _, err := fake.KillKubelet(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	var notReady time.Duration
	framework.Eventually(t, 4*time.Minute, "the node repaired and its instance terminated", func() (bool, string) {
		node := &corev1.Node{}
		if err := framework.Kube.Get(context.Background(), types.NamespacedName{Name: victim.Status.NodeName}, node); err == nil && !framework.NodeReady(node) && notReady == 0 {
			notReady = time.Since(start)
		}
		state := instances(t)[id]
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return state == "terminated" && n == 2, fmt.Sprintf("instance %s, %d running", state, n)
	})
	if j.Count("deleting unhealthy node") != 1 {
		t.Fatalf("%d repairs logged, want 1", j.Count("deleting unhealthy node"))
	}
	t.Logf("kubelet of %s killed: Node NotReady after %s; repaired, instance terminated and pods running elsewhere after %s",
		id, notReady.Round(time.Second), time.Since(start).Round(time.Second))
}

// TestDrainGroupsAndDeadline: a node runs an ordinary pod, a DaemonSet pod
// and a critical pod. Its NodeClaim is deleted: they are evicted in
// Karpenter's order. A second node runs a pod whose shutdown (its preStop
// hook) outlasts the NodeClaim's terminationGracePeriod: the node is gone
// when the period is up.
func TestDrainGroupsAndDeadline(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	const tgp = 60 * time.Second
	manifest := strings.Replace(guide03OnSmallTypes(t, "Never", 1), "      expireAfter: 720h", "      expireAfter: 720h\n      terminationGracePeriod: 60s", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	framework.Kubectl(t, `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 10m, memory: 16Mi}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: dns, namespace: kube-system}
spec:
  replicas: 1
  selector: {matchLabels: {app: dns}}
  template:
    metadata: {labels: {app: dns}}
    spec:
      priorityClassName: system-cluster-critical
      affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, namespaces: [default], labelSelector: {matchLabels: {app: inflate}}}]}}
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 10m, memory: 16Mi}}}]
`, "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the three pods run on one node", func() (bool, string) {
		inflate, byNode := framework.Running(t, map[string]string{"app": "inflate"})
		agents, _ := framework.Running(t, map[string]string{"app": "agent"})
		dns := runningIn(t, "kube-system", "dns")
		return inflate == 1 && agents >= 1 && dns == 1, fmt.Sprintf("inflate %d %v, agents %d, dns %d", inflate, byNode, agents, dns)
	})
	first := framework.NodeClaims(t)[0]
	watch := watchDeletions(t, first.Status.NodeName)
	framework.Kubectl(t, "", "delete", "nodeclaim", first.Name, "--wait=false")
	framework.Eventually(t, 3*time.Minute, "the first node drained and gone", func() (bool, string) {
		node := &corev1.Node{}
		err := framework.Kube.Get(context.Background(), types.NamespacedName{Name: first.Status.NodeName}, node)
		return err != nil, fmt.Sprintf("deletions so far %v", watch.order())
	})
	order := watch.order()
	want := []string{"inflate", "agent", "dns"}
	if len(order) < 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("pods began terminating in the order %v, want %v (Karpenter's groups)", order, want)
	}

	// The slow pod: its preStop takes 10 minutes, its grace period an hour.
	framework.Kubectl(t, "", "delete", "daemonset", "agent")
	framework.Kubectl(t, "", "delete", "deployment", "dns", "-n", "kube-system")
	framework.Kubectl(t, "", "patch", "deployment", "inflate", "--type", "merge", "-p",
		`{"spec":{"template":{"metadata":{"annotations":{"pod-delete.stage.kwok.x-k8s.io/delay":"10m"}},"spec":{"terminationGracePeriodSeconds":3600}}}}`)
	var second v1.NodeClaim
	framework.Eventually(t, 3*time.Minute, "the slow pod runs, alone", func() (bool, string) {
		var pods corev1.PodList
		if err := framework.Kube.List(context.Background(), &pods, client.MatchingLabels{"app": "inflate"}); err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 || pods.Items[0].Annotations["pod-delete.stage.kwok.x-k8s.io/delay"] != "10m" || pods.Items[0].Status.Phase != corev1.PodRunning {
			return false, fmt.Sprintf("%d inflate pods", len(pods.Items))
		}
		claims := framework.NodeClaims(t)
		for _, nc := range claims {
			if nc.Status.NodeName == pods.Items[0].Spec.NodeName && nc.DeletionTimestamp == nil {
				second = nc
			}
		}
		return second.Name != "", fmt.Sprintf("on %s, %d NodeClaims", pods.Items[0].Spec.NodeName, len(claims))
	})
	start := time.Now()
	framework.Kubectl(t, "", "delete", "nodeclaim", second.Name, "--wait=false")
	framework.Eventually(t, tgp+2*time.Minute, "the second node gone once its terminationGracePeriod is up", func() (bool, string) {
		node := &corev1.Node{}
		err := framework.Kube.Get(context.Background(), types.NamespacedName{Name: second.Status.NodeName}, node)
		return err != nil, "the node is still there"
	})
	took := time.Since(start)
	if took < tgp-5*time.Second {
		t.Errorf("the node went after %s, before its %s terminationGracePeriod, with the slow pod's shutdown under way", took.Round(time.Second), tgp)
	}
	t.Logf("drain order %v; the node whose pod's shutdown outlasts a %s terminationGracePeriod went after %s", order, tgp, took.Round(time.Second))
}

// runningIn counts the Running pods labelled app in a namespace.
func runningIn(t testing.TB, namespace, app string) int {
	t.Helper()
	var pods corev1.PodList
	if err := framework.Kube.List(context.Background(), &pods, client.InNamespace(namespace), client.MatchingLabels{"app": app}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// deletionWatch records, for the pods on one node, the order in which
// they began terminating, by their app label.
type deletionWatch struct {
	mu   sync.Mutex
	seen map[string]bool
	apps []string
}

func watchDeletions(t testing.TB, node string) *deletionWatch {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(framework.Cluster.Config)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	d := &deletionWatch{seen: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (p.DeletionTimestamp == nil && ev.Type != watch.Deleted) {
				continue
			}
			d.mu.Lock()
			if !d.seen[p.Namespace+"/"+p.Name] {
				d.seen[p.Namespace+"/"+p.Name] = true
				d.apps = append(d.apps, p.Labels["app"])
			}
			d.mu.Unlock()
		}
	}()
	return d
}

func (d *deletionWatch) order() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.apps...)
}

// TestDoNotDisruptDuration: karpenter.sh/do-not-disrupt set to a duration
// holds its pod's node that long after the pod starts, and not after: the
// underutilized node is replaced once the duration is over. The acceptance
// asks for "30m" (RELIABILITY_DND=30m, about 35 minutes); the default is
// 1m.
func TestDoNotDisruptDuration(t *testing.T) {
	dnd := os.Getenv("RELIABILITY_DND")
	if dnd == "" {
		dnd = "1m"
	}
	hold, err := time.ParseDuration(dnd)
	if err != nil {
		t.Fatalf("RELIABILITY_DND=%q: %v", dnd, err)
	}
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	j := framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifest := strings.Replace(framework.ReadSeed(t, "03-scale-up-down.yaml"), "consolidateAfter: 1m", "consolidateAfter: 5s", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "five inflate pods run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 5, fmt.Sprintf("%d running", n)
	})
	first := framework.NodeClaims(t)[0]
	// One pod left, protected: the big node is worth replacing, but not
	// until the protection is over.
	framework.Kubectl(t, "", "patch", "deployment", "inflate", "--type", "merge", "-p",
		fmt.Sprintf(`{"spec":{"replicas":1,"template":{"metadata":{"annotations":{"karpenter.sh/do-not-disrupt":%q}}}}}`, dnd))
	var started time.Time
	framework.Eventually(t, 2*time.Minute, "the protected pod runs alone", func() (bool, string) {
		var pods corev1.PodList
		if err := framework.Kube.List(context.Background(), &pods, client.MatchingLabels{"app": "inflate"}); err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 || pods.Items[0].Annotations[v1.AnnotationDoNotDisrupt] != dnd || pods.Items[0].Status.StartTime == nil {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		started = pods.Items[0].Status.StartTime.Time
		return pods.Items[0].Status.Phase == corev1.PodRunning, string(pods.Items[0].Status.Phase)
	})
	// The positive signal that the node was weighed and held: the event
	// naming the protection.
	if framework.WaitForEvent(t, 2*time.Minute, "DisruptionBlocked", first.Status.NodeName, "karpenter.sh/do-not-disrupt: "+dnd) == "" {
		t.Fatalf("no DisruptionBlocked event naming the protection")
	}
	var decided time.Time
	framework.Eventually(t, hold+3*time.Minute, "the node replaced once the protection is over", func() (bool, string) {
		if decided.IsZero() && j.Decided(first.Name, first.Status.NodeName) {
			decided = time.Now()
		}
		claims := framework.NodeClaims(t)
		return !decided.IsZero() && len(claims) == 1 && claims[0].Name != first.Name, fmt.Sprintf("%d NodeClaims", len(claims))
	})
	if early := started.Add(hold).Sub(decided); early > 0 {
		t.Fatalf("the node was disrupted %s after its pod started, %s before its %s protection ended", decided.Sub(started).Round(time.Second), early.Round(time.Second), dnd)
	}
	t.Logf("do-not-disrupt %q: the pod started at %s; its node was disrupted %s after", dnd, started.Format(time.RFC3339), decided.Sub(started).Round(time.Second))
}

// TestInstanceStatusImpaired: EC2's system status check fails for the
// instance of a node whose pods a PDB allows no eviction. With the
// interruption queue set, Joiner reads the status checks, leaves the node
// while the check has failed for less than two minutes (it may recover),
// then terminates it forcefully: the PDB does not hold it, the instance
// ends terminated and the pods run elsewhere.
func TestInstanceStatusImpaired(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	j := framework.StartJoiner(t, awsEnv("INTERRUPTION_QUEUE="+clusterName)...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifest := guide03OnSmallTypes(t, "Never", 3) + `---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: inflate}
spec:
  minAvailable: 3
  selector: {matchLabels: {app: inflate}}
`
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	t.Cleanup(func() { framework.Kubectl(t, "", "delete", "pdb", "inflate", "--ignore-not-found") })
	framework.Eventually(t, 3*time.Minute, "three pods run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 3, fmt.Sprintf("%d running", n)
	})
	victim := framework.NodeClaims(t)[0]
	id := instanceID(victim.Status.ProviderID)
	// Failing for a minute: the next poll (within a minute) finds it too
	// young, the one after acts.
	start := time.Now()
	since := start.Add(-time.Minute)
	if err := fake.SetInstanceHealth(fakeaws.InstanceHealth{InstanceID: id, SystemStatus: "impaired", ImpairedSince: since}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.SetInstanceHealth(fakeaws.InstanceHealth{InstanceID: id}) })
	const waiting = "instance status check failed; waiting for it to recover"
	framework.Eventually(t, 2*time.Minute, "the poller finds the check failed and waits", func() (bool, string) {
		_, ok := j.FirstAt(waiting)
		return ok, "no line " + waiting
	})
	kept := false
	for _, nc := range framework.NodeClaims(t) {
		kept = kept || (nc.Name == victim.Name && nc.DeletionTimestamp == nil)
	}
	if !kept {
		t.Fatalf("the NodeClaim of an instance whose check failed a minute ago is gone or deleting when the poller says it waits")
	}
	framework.Eventually(t, 4*time.Minute, "the impaired node replaced and its instance terminated", func() (bool, string) {
		for _, nc := range framework.NodeClaims(t) {
			if nc.Name == victim.Name {
				return false, "the NodeClaim is still there: " + framework.Condition(nc, v1.ConditionTypeDrained)
			}
		}
		state := instances(t)[id]
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return state == "terminated" && n == 3, fmt.Sprintf("instance %s, %d running", state, n)
	})
	if j.Count("deleting unhealthy instance") != 1 {
		t.Fatalf("%d forced terminations logged, want 1", j.Count("deleting unhealthy instance"))
	}
	if at, _ := j.FirstAt("deleting unhealthy instance"); at.Sub(since) < 2*time.Minute {
		t.Fatalf("the instance was terminated %s after its check began failing, before Karpenter's two minutes", at.Sub(since).Round(time.Second))
	}
	t.Logf("system status of %s impaired: NodeClaim forced past its PDB, instance terminated and pods running elsewhere after %s",
		id, time.Since(start).Round(time.Second))
}
