package provisioning

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRestartDuringLaunch kills the controller while NodeClaims launch and
// checks the restarted one finishes the job without duplicates or orphans.
func TestRestartDuringLaunch(t *testing.T) {
	first := framework.StartJoiner(t, "KWOK_LAUNCH_DELAY=6s", "DISABLE_LEADER_ELECTION=false", "LEADER_ELECTION_NAMESPACE=default")
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")
	// Anti-affinity forces one node per pod, so the plan has several NodeClaims.
	framework.Kubectl(t, framework.Deployment("spread", 4, "500m", "512Mi", `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: spread}}}
`), "apply", "-f", "-")
	framework.Eventually(t, time.Minute, "NodeClaims to be created", func() (bool, string) {
		n := len(framework.NodeClaims(t))
		return n == 4, fmt.Sprintf("%d nodeclaims", n)
	})
	first.Stop(syscall.SIGKILL)
	created := map[string]bool{}
	for _, nc := range framework.NodeClaims(t) {
		created[nc.Name] = true
	}
	second := framework.StartJoiner(t, "KWOK_LAUNCH_DELAY=6s", "DISABLE_LEADER_ELECTION=false", "LEADER_ELECTION_NAMESPACE=default")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Eventually(t, 3*time.Minute, "4 pods Running", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "spread"})
		return n == 4, fmt.Sprintf("%d running on %v", n, nodes)
	})
	claims := framework.NodeClaims(t)
	if len(claims) != 4 {
		t.Errorf("%d nodeclaims after restart, want 4 (no duplicates)", len(claims))
	}
	for _, nc := range claims {
		if !created[nc.Name] {
			t.Errorf("nodeclaim %s was created after the restart", nc.Name)
		}
	}
	var nodes corev1.NodeList
	if err := framework.Kube.List(context.Background(), &nodes, client.MatchingLabels{"joiner.sh/kwok-instance": "true"}); err != nil {
		t.Fatal(err)
	}
	owned := map[string]bool{}
	for _, nc := range claims {
		owned[nc.Status.ProviderID] = true
	}
	for _, n := range nodes.Items {
		if !owned[n.Spec.ProviderID] {
			t.Errorf("node %s (%s) has no nodeclaim", n.Name, n.Spec.ProviderID)
		}
	}
	if len(nodes.Items) != 4 {
		t.Errorf("%d nodes, want 4", len(nodes.Items))
	}
	if !strings.Contains(second.Logs(), "launched nodeclaim") && !strings.Contains(second.Logs(), "registered nodeclaim") {
		t.Errorf("the restarted controller did not finish any launch")
	}
}

func TestMissingNodeClass(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, strings.Replace(strings.SplitN(framework.PoolAndClass, "---", 2)[1], "name: default}\n      requirements", "name: missing}\n      requirements", 1), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("orphan", 1, "500m", "512Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, time.Minute, "NodeClassReady=False on the NodePool", func() (bool, string) {
		var np v1.NodePool
		if err := framework.Kube.Get(context.Background(), client.ObjectKey{Name: "default"}, &np); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeNodeClassReady)
		return c != nil && c.Status == "False" && c.Reason == "NodeClassNotFound" && meta.IsStatusConditionFalse(np.Status.Conditions, "Ready"), fmt.Sprintf("%+v", np.Status.Conditions)
	})
	framework.Eventually(t, time.Minute, "a FailedScheduling event naming the missing EC2NodeClass", func() (bool, string) {
		out := framework.Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=FailedScheduling", "-o", "custom-columns=MSG:.message")
		return strings.Contains(out, `EC2NodeClass "missing" not found`), framework.TailLines(out, 3)
	})
	if n := len(framework.NodeClaims(t)); n != 0 {
		t.Fatalf("%d nodeclaims for a NodePool without its EC2NodeClass", n)
	}
}

func TestInvalidSettings(t *testing.T) {
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{env: []string{"BATCH_IDLE_DURATION=soon"}, want: `invalid setting BATCH_IDLE_DURATION (--batch-idle-duration, from env BATCH_IDLE_DURATION) "soon"`},
		{args: []string{"--batch-max-duration=-1s"}, want: "invalid setting BATCH_MAX_DURATION"},
		{env: []string{"FEATURE_GATES=Teleport=true"}, want: `unknown feature gate "Teleport"`},
		{env: []string{"CLOUD_PROVIDER=gcp"}, want: "invalid setting CLOUD_PROVIDER"},
		{args: []string{"--cloud-provider=aws"}, want: "missing setting CLUSTER_NAME (--cluster-name)"},
		{env: []string{"KUBE_CLIENT_QPS=0"}, want: "invalid setting KUBE_CLIENT_QPS"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			cmd := exec.Command(framework.Binary, tc.args...)
			cmd.Env = append(append(os.Environ(), "KUBECONFIG="+framework.Cluster.Kubeconfig), tc.env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatalf("joiner started with invalid settings:\n%s", out.String())
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("joiner did not stop on invalid settings")
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, out.String())
			}
		})
	}
}

// TestGarbageCollectsOrphanInstances checks that an instance without a
// NodeClaim, as a crash between launch and recording it could leave, is
// terminated.
func TestGarbageCollectsOrphanInstances(t *testing.T) {
	framework.StartJoiner(t, "GARBAGE_COLLECT_INTERVAL=1s", "GARBAGE_COLLECT_MIN_AGE=2s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, `apiVersion: v1
kind: Node
metadata:
  name: orphan
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {joiner.sh/kwok-instance: "true", kubernetes.io/hostname: orphan}
spec:
  providerID: kwok://us-east-1/us-east-1a/orphan
status:
  allocatable: {cpu: "2", memory: 4Gi, pods: "20"}
  capacity: {cpu: "2", memory: 4Gi, pods: "20"}
`, "apply", "-f", "-")
	framework.Eventually(t, time.Minute, "the orphan instance to be terminated", func() (bool, string) {
		var n corev1.Node
		err := framework.Kube.Get(context.Background(), client.ObjectKey{Name: "orphan"}, &n)
		return err != nil, fmt.Sprintf("still there: %v", err)
	})
}
