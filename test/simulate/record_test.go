package simulate

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestRecordAndReplay records the local control plane with `joiner
// simulate record` while a Deployment and a StatefulSet are scaled, a bare
// Pod is created, a DaemonSet and the NodePool changed, and replays what it wrote with
// `joiner simulate`: the trace holds the scales, the Pod and the
// DaemonSet's and NodePool's changes, the manifests hold the cluster's NodePool, EC2NodeClass,
// workloads, StorageClass and claims as they were at the start, with the
// node the NodePool manages, and the run accepts them and launches nodes
// for the pods the node has no room for.
func TestRecordAndReplay(t *testing.T) {
	t.Cleanup(func() { framework.ResetCluster(t) })
	// A node of the NodePool's (no kubelet serves it: it only needs to be
	// listed), and one of no NodePool's, which is not recorded.
	framework.Kubectl(t, `apiVersion: v1
kind: Node
metadata:
  name: recorded-0
  labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: c6a.large, topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: on-demand}
spec:
  taints: [{key: team, value: web, effect: PreferNoSchedule}]
---
apiVersion: v1
kind: Node
metadata: {name: unmanaged-0}
`, "apply", "-f", "-")
	t.Cleanup(func() { framework.Kubectl(t, "", "delete", "node", "recorded-0", "unmanaged-0", "--ignore-not-found") })
	framework.Kubectl(t, framework.PoolWith("1m", "720h"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 2, "1", "1Gi", "")+"---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}\n", "apply", "-f", "-")
	// A StatefulSet with a claim of a class that waits for its consumer,
	// and its claim, which no provisioner here binds.
	framework.Kubectl(t, `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: recorded-gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {storageClassName: recorded-gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
`, "apply", "-f", "-")
	t.Cleanup(func() {
		framework.Kubectl(t, "", "delete", "statefulset", "db", "--ignore-not-found")
		framework.Kubectl(t, "", "delete", "pvc", "--all", "--ignore-not-found")
		framework.Kubectl(t, "", "delete", "storageclass", "recorded-gp3", "--ignore-not-found")
	})
	framework.Eventually(t, time.Minute, "the StatefulSet's claim made", func() (bool, string) {
		out := framework.Kubectl(t, "", "get", "pvc", "-o", "name")
		return strings.Contains(out, "data-db-0"), out
	})
	framework.Kubectl(t, "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent, namespace: default}\nspec: {selector: {matchLabels: {app: agent}}, template: {metadata: {labels: {app: agent}}, spec: {containers: [{name: agent, image: pause, resources: {requests: {cpu: 100m}}}]}}}\n", "apply", "-f", "-")
	dir := t.TempDir()
	rec := exec.Command(framework.Binary, "simulate", "record", "--kubeconfig", framework.Cluster.Kubeconfig, "--out", dir)
	stderr, err := rec.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	rec.Stdout = &stdout
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Process.Kill() })
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "recording; stop with Ctrl-C") {
				close(started)
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("joiner simulate record never said it was recording")
	}
	framework.Kubectl(t, "", "scale", "deployment/web", "--replicas=5")
	// A new template: a roll-out, which the trace applies.
	framework.Kubectl(t, "", "set", "env", "deployment/web", "ROLLED=yes")
	framework.Kubectl(t, "", "scale", "statefulset/db", "--replicas=2")
	framework.Kubectl(t, "", "set", "resources", "daemonset/agent", "--requests=cpu=200m")
	framework.Kubectl(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: lone, namespace: default}\nspec: {containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]}\n", "apply", "-f", "-")
	framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`)
	// The informers see a write within moments; stop once the API server
	// has them all.
	framework.Eventually(t, time.Minute, "the scale and the patch stored", func() (bool, string) {
		out := framework.Kubectl(t, "", "get", "deployment/web", "nodepool/default", "statefulset/db", "pod/lone", "daemonset/agent", "-o",
			"jsonpath={.items[0].spec.replicas}/{.items[1].spec.template.metadata.labels.team}/{.items[2].spec.replicas}/{.items[3].metadata.name}/{.items[4].spec.template.spec.containers[0].resources.requests.cpu}/{.items[0].spec.template.spec.containers[0].env[0].value}")
		return out == "5/payments/2/lone/200m/yes", out
	})
	if err := rec.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := rec.Wait(); err != nil {
		t.Fatalf("joiner simulate record: %v\n%s", err, stdout.String())
	}
	trace, err := os.ReadFile(filepath.Join(dir, "trace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"deployment: default/web\n    replicas: 5", "value: \"yes\"", "team: payments", "replicas: 2\n    statefulSet: default/db", "kind: Pod", "kind: DaemonSet"} {
		if !strings.Contains(string(trace), want) {
			t.Errorf("the trace has no %q:\n%s", want, trace)
		}
	}
	pools, err := os.ReadFile(filepath.Join(dir, "cluster.yaml"))
	if err != nil || !strings.Contains(string(pools), "kind: NodePool") || !strings.Contains(string(pools), "kind: EC2NodeClass") ||
		!strings.Contains(string(pools), "kind: PodDisruptionBudget") || strings.Contains(string(pools), "payments") ||
		!strings.Contains(string(pools), "name: recorded-0") || strings.Contains(string(pools), "unmanaged-0") {
		t.Errorf("cluster.yaml should hold the NodePool, EC2NodeClass, PDB and the NodePool's node as they were at the start (%v):\n%s", err, pools)
	}
	if !strings.Contains(string(pools), "name: recorded-gp3") || !strings.Contains(string(pools), "name: data-db-0") {
		t.Errorf("cluster.yaml should hold the StorageClass and the StatefulSet's claim:\n%s", pools)
	}
	if workload, err := os.ReadFile(filepath.Join(dir, "workload.yaml")); err != nil || !strings.Contains(string(workload), "kind: StatefulSet") {
		t.Errorf("workload.yaml should hold the StatefulSet (%v):\n%s", err, workload)
	}
	// The recording lasted seconds, less than a launch takes: replay it
	// for an hour.
	long := regexp.MustCompile(`(?m)^duration: .*$`).ReplaceAll(trace, []byte("duration: 1h"))
	if err := os.WriteFile(filepath.Join(dir, "trace.yaml"), long, 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report")
	out, err := exec.Command(framework.Binary, "simulate", "-f", filepath.Join(dir, "cluster.yaml"), "-f", filepath.Join(dir, "workload.yaml"),
		"--trace", filepath.Join(dir, "trace.yaml"), "--out", report).CombinedOutput()
	if err != nil {
		t.Fatalf("replaying the recording: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(report, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var summary struct {
		NodesLaunched     int     `json:"nodesLaunched"`
		PendingSecondsMax float64 `json:"pendingSecondsMax"`
	}
	if err := json.Unmarshal(raw, &summary); err != nil {
		t.Fatal(err)
	}
	if summary.NodesLaunched == 0 || summary.PendingSecondsMax > 300 {
		t.Errorf("the replay launched %d nodes, and a pod waited up to %.0fs; want nodes for web's pods within minutes: %s", summary.NodesLaunched, summary.PendingSecondsMax, raw)
	}
}
