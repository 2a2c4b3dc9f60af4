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
// simulate record` while a Deployment is scaled and its NodePool changed,
// and replays what it wrote with `joiner simulate`: the trace holds the
// scale and the NodePool's change, the manifests hold the cluster's
// NodePool, EC2NodeClass and Deployment as they were at the start, with
// the node the NodePool manages, and the run accepts them and launches
// nodes for the pods the node has no room for.
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
	framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`)
	// The informers see a write within moments; stop once the API server
	// has them all.
	framework.Eventually(t, time.Minute, "the scale and the patch stored", func() (bool, string) {
		out := framework.Kubectl(t, "", "get", "deployment/web", "nodepool/default", "-o", "jsonpath={.items[0].spec.replicas}/{.items[1].spec.template.metadata.labels.team}")
		return out == "5/payments", out
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
	for _, want := range []string{"deployment: default/web\n    replicas: 5", "team: payments"} {
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
