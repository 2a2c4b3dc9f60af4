// Package provisioning tests the joiner binary end to end on a real local
// control plane: pending pods become NodeClaims, kwok nodes and Running pods.
package provisioning

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	cluster *localcluster.Cluster
	binary  string
	kube    client.Client
)

func TestMain(m *testing.M) {
	os.Exit(localcluster.Main(m, &cluster, func(c *localcluster.Cluster) error {
		dir, err := os.MkdirTemp("", "joiner-bin-")
		if err != nil {
			return err
		}
		binary = filepath.Join(dir, "joiner")
		build := exec.Command("go", "build", "-o", binary, "./cmd/joiner")
		build.Dir = c.Root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building joiner: %v\n%s", err, out)
		}
		kube, err = client.New(c.Config, client.Options{Scheme: operator.Scheme()})
		return err
	}))
}

// joiner is a running controller process.
type joiner struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

func (j *joiner) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.logs.Write(p)
}

func (j *joiner) Logs() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.logs.String()
}

// startJoiner runs the binary with settings as environment variables; it is
// stopped when the test ends, after the test's own cleanups have run.
func startJoiner(t testing.TB, env ...string) *joiner {
	t.Helper()
	j := &joiner{done: make(chan struct{})}
	j.cmd = exec.Command(binary)
	j.cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "METRICS_PORT=0", "HEALTH_PROBE_PORT=0", "DISABLE_LEADER_ELECTION=true")
	j.cmd.Env = append(j.cmd.Env, env...)
	j.cmd.Stdout, j.cmd.Stderr = j, j
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = j.cmd.Wait(); close(j.done) }()
	t.Cleanup(func() {
		j.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("joiner logs:\n%s", tailLines(j.Logs(), 60))
		}
	})
	return j
}

func (j *joiner) stop(sig syscall.Signal) {
	_ = j.cmd.Process.Signal(sig)
	select {
	case <-j.done:
	case <-time.After(20 * time.Second):
		_ = j.cmd.Process.Kill()
		<-j.done
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kubectl runs kubectl against the test cluster.
func kubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(cluster.Bins.Kubectl, append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, last)
}

// resetCluster deletes what a test created and waits until every NodeClaim
// and the nodes behind them are gone; the controller must still run.
func resetCluster(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	_ = kube.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace("default"))
	_ = kube.DeleteAllOf(ctx, &appsv1.DaemonSet{}, client.InNamespace("default"))
	_ = kube.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.GracePeriodSeconds(0))
	var pools v1.NodePoolList
	_ = kube.List(ctx, &pools)
	for i := range pools.Items {
		_ = kube.Delete(ctx, &pools.Items[i])
	}
	var claims v1.NodeClaimList
	_ = kube.List(ctx, &claims)
	for i := range claims.Items {
		_ = kube.Delete(ctx, &claims.Items[i])
	}
	eventually(t, 90*time.Second, "NodeClaims and their nodes to be deleted", func() (bool, string) {
		var claims v1.NodeClaimList
		var nodes corev1.NodeList
		_ = kube.List(ctx, &claims)
		_ = kube.List(ctx, &nodes, client.MatchingLabels{"joiner.sh/kwok-instance": "true"})
		return len(claims.Items) == 0 && len(nodes.Items) == 0, fmt.Sprintf("%d nodeclaims, %d nodes", len(claims.Items), len(nodes.Items))
	})
	kubectl(t, "", "delete", "ec2nodeclasses", "--all", "--ignore-not-found")
	// One delete-collection call: kubectl deletes events one by one.
	_ = kube.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace("default"))
}
