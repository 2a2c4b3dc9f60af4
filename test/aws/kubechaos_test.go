//go:build chaos

package aws

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestKubernetesChaos (make chaos) is issue 18's long chaos run: what a
// real cluster does to Joiner, all at once. Guide 03's workload on spot,
// behind a PDB of maxUnavailable 1, goes up, is interrupted and comes down
// while:
//   - Joiner is killed (SIGKILL) CHAOS_KILLS times (default 50), at random
//     moments (a fixed seed) across launch, interruption, drain, replace
//     and delete;
//   - one API write in ten to NodeClaims and Nodes fails, with a conflict
//     or a 500 (the API fault proxy);
//   - AWS throttles and fails some calls;
//   - 100 spot interruption messages arrive within 10 s, one for every
//     node and the rest repeated, as EventBridge delivers at least once;
//   - two minutes after the warnings, AWS takes the interrupted instances
//     still running, and one other instance is terminated out of band;
//   - a kubelet dies while its node is being drained.
//
// An observer watches the inflate pods from the start, and the proxy logs
// every write Joiner makes. At the end:
//   - every instance has a NodeClaim, and every NodeClaim an instance;
//   - the Deployment has its replicas Running;
//   - Joiner deleted no pod past its PDB (all its pod removals went
//     through the Eviction API, which enforces the PDB) except on nodes
//     whose kubelet or instance was gone;
//   - no pod was evicted more than twice.
//
// The figures go to docs/reliability.md.
func TestKubernetesChaos(t *testing.T) {
	kills := 50
	if v := os.Getenv("CHAOS_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 5 {
			t.Fatalf("CHAOS_KILLS=%q: want a whole number of at least 5 (one per phase)", v)
		}
		kills = n
	}
	start := time.Now()
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	rnd := rand.New(rand.NewSource(1800))
	if err := fake.SetFaults(fakeaws.Faults{ThrottleRate: 0.05, ErrorRate: 0.02, Seed: 18}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.SetFaults(fakeaws.Faults{}) })
	proxy := framework.StartAPIFaults(t, 1800)
	writeFaults := []framework.APIFault{
		{Method: http.MethodPatch, Resource: "nodeclaims", Subresource: "status", Status: http.StatusInternalServerError, Rate: 0.1},
		{Method: http.MethodPatch, Resource: "nodeclaims", Status: http.StatusConflict, Rate: 0.1},
		{Method: http.MethodPatch, Resource: "nodes", Status: http.StatusConflict, Rate: 0.1},
		{Method: http.MethodPut, Resource: "nodes", Status: http.StatusServiceUnavailable, Rate: 0.1},
	}
	proxy.Set(writeFaults...)
	pods := observePods(t)
	env := append(awsEnv("INTERRUPTION_QUEUE="+clusterName, "GARBAGE_COLLECT_INTERVAL=5s"), proxy.Env())

	var joiners []*framework.Joiner
	joiner := framework.StartJoiner(t, env...)
	joiners = append(joiners, joiner)
	t.Cleanup(func() { framework.ResetCluster(t) })
	killed := map[string]int{}
	killedTotal := 0
	// killDuring kills Joiner n times at random moments of a phase, 1 to
	// 8 s apart, each after the restarted one has had time to act.
	killDuring := func(phase string, n int) {
		for range n {
			if killedTotal == kills {
				return
			}
			time.Sleep(time.Duration(1000+rnd.Intn(7000)) * time.Millisecond)
			joiner.Stop(syscall.SIGKILL)
			joiner = framework.StartJoiner(t, env...)
			joiners = append(joiners, joiner)
			t.Cleanup(func() { framework.ResetCluster(t) }) // while this one runs its finalizers
			killed[phase]++
			killedTotal++
		}
	}
	count := func(line string) int {
		n := 0
		for _, j := range joiners {
			n += j.Count(line)
		}
		return n
	}
	running := func(n int, within time.Duration, what string) {
		framework.Eventually(t, within, what, func() (bool, string) {
			got, byNode := framework.Running(t, map[string]string{"app": "inflate"})
			return got == n, fmt.Sprintf("%d running %v, %d NodeClaims; %d writes failed", got, byNode, len(framework.NodeClaims(t)), len(proxy.Failed()))
		})
	}
	// The kills are shared out over the five phases.
	share := func(phase int) int { return kills/5 + btoi(phase < kills%5) }
	var figures []string
	mark := time.Now()
	phase := func(what string) {
		figures = append(figures, fmt.Sprintf("%s: %s, %d kills", what, time.Since(mark).Round(time.Second), killed[what]))
		mark = time.Now()
	}

	// 1. Launch: 24 pods on spot.
	manifest := strings.Replace(guide03OnSmallTypes(t, "10s", 24), `values: ["on-demand"]`, `values: ["spot"]`, 1) + `---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: inflate}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: inflate}}
`
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	t.Cleanup(func() { framework.Kubectl(t, "", "delete", "pdb", "inflate", "--ignore-not-found") })
	killDuring("launch", share(0))
	running(24, 8*time.Minute, "24 pods to run after the launches")
	phase("launch")

	// 2. Interruption: 100 messages within 10 s, over every node.
	claims := framework.NodeClaims(t)
	interrupted := map[string]string{} // NodeClaim -> instance
	var ids []string
	for _, nc := range claims {
		interrupted[nc.Name] = instanceID(nc.Status.ProviderID)
		ids = append(ids, instanceID(nc.Status.ProviderID))
	}
	sort.Strings(ids)
	// In batches of ten, a batch every second: 100 messages within 10 s.
	queue := sqs.NewFromConfig(clientConfig(t, fake.URL(), region))
	queueURL, err := queue.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(clusterName)})
	if err != nil {
		t.Fatal(err)
	}
	var sendWG sync.WaitGroup
	var sent time.Duration
	sendWG.Add(1)
	go func() {
		defer sendWG.Done()
		begin := time.Now()
		defer func() { sent = time.Since(begin) }()
		for batch := range 10 {
			var entries []sqstypes.SendMessageBatchRequestEntry
			for j := range 10 {
				i := batch*10 + j
				id := ids[i%len(ids)]
				if i >= len(ids) {
					id = ids[rnd.Intn(len(ids))]
				}
				body := fmt.Sprintf(`{"version":"0","id":"chaos-%d","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":%q,"resources":["arn:aws:ec2:%s:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
					i, time.Now().UTC().Format(time.RFC3339), region, region, id, id)
				entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(body)})
			}
			out, err := queue.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: queueURL.QueueUrl, Entries: entries})
			if err != nil {
				t.Errorf("sending interruption batch %d: %v", batch, err)
			} else if len(out.Failed) > 0 {
				t.Errorf("sending interruption batch %d: %d messages refused", batch, len(out.Failed))
			}
			if batch < 9 {
				time.Sleep(900 * time.Millisecond) // the pace of the storm, not a wait for a result
			}
		}
	}()
	interruptedAt := time.Now()
	killDuring("interruption", share(1))
	sendWG.Wait()
	// AWS takes the interrupted instances two minutes after the warning,
	// whatever is left on them (the drain goes one pod at a time under the
	// PDB); and one replacement is terminated out of band, with no warning
	// at all.
	outOfBand := map[string]bool{}
	framework.Eventually(t, 4*time.Minute, "a replacement node runs pods", func() (bool, string) {
		_, byNode := framework.Running(t, map[string]string{"app": "inflate"})
		for _, nc := range framework.NodeClaims(t) {
			if _, old := interrupted[nc.Name]; !old && byNode[nc.Status.NodeName] > 0 && nc.DeletionTimestamp == nil {
				outOfBand[instanceID(nc.Status.ProviderID)] = true
				return true, ""
			}
		}
		return false, fmt.Sprintf("%v", byNode)
	})
	if wait := time.Until(interruptedAt.Add(2 * time.Minute)); wait > 0 {
		time.Sleep(wait) // the two minutes the warning gives, no signal to wait for
	}
	reclaimed := 0
	states := instances(t)
	for _, id := range ids {
		if s := states[id]; s == "running" || s == "pending" {
			reclaimed++
			outOfBand[id] = true
		}
	}
	for id := range outOfBand {
		if _, err := ec2Client(t).TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 8*time.Minute, "every interrupted node gone and 24 pods running", func() (bool, string) {
		left := 0
		for _, nc := range framework.NodeClaims(t) {
			if _, ok := interrupted[nc.Name]; ok {
				left++
			}
		}
		got, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return left == 0 && got == 24, fmt.Sprintf("%d interrupted NodeClaims left, %d running", left, got)
	})
	phase("interruption")

	// 3. Drain: scale down (empty nodes go), then a node with a pod is
	// deleted, as a user would; its pod takes 30 s to shut down (kwok's
	// slow-delete stage), and its kubelet dies once the drain has begun.
	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "8")
	running(8, 5*time.Minute, "8 pods to run after the scale-down")
	var dead v1.NodeClaim
	var slowPod string
	framework.Eventually(t, 5*time.Minute, "a node with a pod to drain", func() (bool, string) {
		var list corev1.PodList
		if err := framework.Kube.List(context.Background(), &list); err != nil {
			return false, err.Error()
		}
		for _, nc := range framework.NodeClaims(t) {
			for _, p := range list.Items {
				if p.Labels["app"] == "inflate" && p.Spec.NodeName == nc.Status.NodeName && nc.DeletionTimestamp == nil && p.DeletionTimestamp == nil {
					dead, slowPod = nc, p.Name
					return true, ""
				}
			}
		}
		return false, "none"
	})
	framework.Kubectl(t, "", "annotate", "pod", slowPod, "pod-delete.stage.kwok.x-k8s.io/delay=10m")
	framework.Kubectl(t, "", "delete", "nodeclaim", dead.Name, "--wait=false")
	framework.Eventually(t, 3*time.Minute, "the drain to begin", func() (bool, string) {
		var p corev1.Pod
		if err := framework.Kube.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: slowPod}, &p); err != nil {
			return false, err.Error()
		}
		return p.DeletionTimestamp != nil, "pod not terminating yet"
	})
	if _, err := fake.KillKubelet(context.Background(), instanceID(dead.Status.ProviderID)); err != nil {
		t.Fatal(err)
	}
	killDuring("drain", share(2))
	framework.Eventually(t, 6*time.Minute, "the dead kubelet's node gone and 8 pods running", func() (bool, string) {
		for _, nc := range framework.NodeClaims(t) {
			if nc.Name == dead.Name {
				return false, "still there: " + framework.Condition(nc, v1.ConditionTypeDrained)
			}
		}
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 8, fmt.Sprintf("%d running", n)
	})
	phase("drain")

	// 4. Replace: a change to the NodePool's template drifts every node,
	// and each is replaced before it is drained.
	framework.Kubectl(t, "", "patch", "nodepool", "default", "--type", "merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"chaos":"drift"}}}}}`)
	killDuring("replace", share(3))
	framework.Eventually(t, 12*time.Minute, "every node replaced by one with the new label, 8 pods running", func() (bool, string) {
		old := 0
		for _, nc := range framework.NodeClaims(t) {
			if nc.Labels["chaos"] != "drift" {
				old++
			}
		}
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return old == 0 && n == 8, fmt.Sprintf("%d NodeClaims left to replace, %d running", old, n)
	})
	phase("replace")

	// 5. Delete: down to 3 pods; the faults stop at the end of the kills,
	// and the cluster must settle at two nodes at most.
	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "3")
	killDuring("delete", kills-killedTotal)
	proxy.Set()
	if err := fake.SetFaults(fakeaws.Faults{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 10*time.Minute, "back to at most three nodes, 3 pods running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		ncs := framework.NodeClaims(t)
		return n == 3 && len(ncs) <= 3, fmt.Sprintf("%d running, %d NodeClaims", n, len(ncs))
	})
	phase("delete")

	// Every instance has a NodeClaim, and every NodeClaim an instance.
	waitOneToOne(t)

	// What Joiner did to pods, from the proxy's log of its writes.
	gone := map[string]bool{dead.Status.NodeName: true}
	for node, id := range pods.nodeInstances() {
		if outOfBand[id] {
			gone[node] = true
		}
	}
	evicted := map[string]int{}
	refused := 0
	for _, w := range proxy.Writes(func(w framework.APIWrite) bool { return w.Resource == "pods" }) {
		switch {
		case w.Method == http.MethodPost && w.Subresource == "eviction" && w.Status < 300:
			evicted[w.Namespace+"/"+w.Name]++
		case w.Method == http.MethodPost && w.Subresource == "eviction" && w.Status == http.StatusTooManyRequests:
			refused++
		case w.Method == http.MethodDelete && w.Status < 300:
			if node := pods.nodeOf(w.Namespace + "/" + w.Name); !gone[node] {
				t.Errorf("Joiner deleted pod %s/%s on %s, bypassing its PDB, though the node's kubelet and instance were there", w.Namespace, w.Name, node)
			}
		}
	}
	twice := 0
	for pod, n := range evicted {
		if n > 2 {
			t.Errorf("pod %s evicted %d times", pod, n)
		}
		if n == 2 {
			twice++
		}
	}
	// Each interrupted node was deleted for its message; a kill between
	// the log line and the delete may log one twice.
	handled := count("initiating delete from interruption message")
	if handled < len(ids) {
		t.Errorf("%d interruption deletions logged for %d interrupted nodes, want one each", handled, len(ids))
	}

	for _, f := range figures {
		t.Log(f)
	}
	t.Logf("%d kills in %s; 100 interruption messages for %d nodes sent in %s, %d NodeClaims deleted for them, %d interrupted instances still running after 2 minutes and taken; %d instances terminated out of band in all; kubelet of %s killed mid-drain",
		killedTotal, time.Since(start).Round(time.Second), len(ids), sent.Round(100*time.Millisecond), handled, reclaimed, len(outOfBand), dead.Status.NodeName)
	t.Logf("%d API writes failed by the proxy; %d AWS calls faulted; %d pods evicted (%d twice), %d evictions refused for the PDB; %d pods seen; %d CreateFleet calls",
		len(proxy.Failed()), faultedCalls(), len(evicted), twice, refused, pods.seen(), len(fake.Calls("ec2", "CreateFleet")))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func faultedCalls() int {
	n := 0
	for _, c := range fake.Calls("", "") {
		if c.Fault != "" {
			n++
		}
	}
	return n
}

// podObserver remembers, for every inflate pod it saw, the node it was
// bound to, and for every node its instance: the proxy's log names pods
// only, and a pod may be gone by the time the log is read.
type podObserver struct {
	mu        sync.Mutex
	node      map[string]string // namespace/name -> node
	instances map[string]string // node -> instance ID
}

func (o *podObserver) nodeOf(pod string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.node[pod]
}

func (o *podObserver) nodeInstances() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]string{}
	for k, v := range o.instances {
		out[k] = v
	}
	return out
}

func (o *podObserver) seen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.node)
}

// observePods watches the inflate pods and the nodes until the test ends,
// through informers, which re-list when the API server ends a watch.
func observePods(t *testing.T) *podObserver {
	t.Helper()
	kube, err := kubernetes.NewForConfig(framework.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	o := &podObserver{node: map[string]string{}, instances: map[string]string{}}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory := informers.NewSharedInformerFactory(kube, 0)
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels["app"] == "inflate" && p.Spec.NodeName != "" {
			o.mu.Lock()
			o.node[p.Namespace+"/"+p.Name] = p.Spec.NodeName
			o.mu.Unlock()
		}
	}
	onNode := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && n.Spec.ProviderID != "" {
			o.mu.Lock()
			o.instances[n.Name] = instanceID(n.Spec.ProviderID)
			o.mu.Unlock()
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, cur any) { onPod(cur) }}); err != nil {
		t.Fatal(err)
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onNode, UpdateFunc: func(_, cur any) { onNode(cur) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return o
}
