// Package framework runs the joiner binary against a package's local control
// plane for end-to-end tests: start and stop the controller, apply YAML,
// wait for conditions and clean up between tests.
package framework

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

	autoscalingv1beta1 "github.com/joiner-autoscaler/joiner/api/autoscaling/v1beta1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The package's control plane, the joiner binary built for it, and a client.
var (
	Cluster *localcluster.Cluster
	Binary  string
	Kube    client.Client
)

// Main starts the control plane and builds joiner; call it from TestMain.
// setup runs after that, for package fixtures such as a local AWS endpoint.
func Main(m *testing.M, setup ...func(*localcluster.Cluster) error) int {
	defer removeBinary()
	return localcluster.Main(m, &Cluster, append([]func(*localcluster.Cluster) error{build}, setup...)...)
}

// MainWith is Main with the control plane's options.
func MainWith(m *testing.M, opts localcluster.Options, setup ...func(*localcluster.Cluster) error) int {
	defer removeBinary()
	return localcluster.MainWith(m, &Cluster, opts, append([]func(*localcluster.Cluster) error{build}, setup...)...)
}

// MainAudited is Main with the apiserver's audit log of the chart's
// service account (localcluster.MainAudited).
func MainAudited(m *testing.M, setup ...func(*localcluster.Cluster) error) int {
	defer removeBinary()
	return localcluster.MainAudited(m, &Cluster, append([]func(*localcluster.Cluster) error{build}, setup...)...)
}

// removeBinary removes the package's build of joiner, 66 MB that each test
// package's run would otherwise leave in the temporary folder.
func removeBinary() {
	if Binary != "" {
		_ = os.RemoveAll(filepath.Dir(Binary))
	}
}

// build builds joiner for the package and makes its client.
func build(c *localcluster.Cluster) error {
	dir, err := os.MkdirTemp("", "joiner-bin-")
	if err != nil {
		return err
	}
	Binary = filepath.Join(dir, "joiner")
	// The joinertest tag adds the internal settings tests may shorten
	// (pkg/operator/testhooks_joinertest.go); users have no such tag.
	cmd := exec.Command("go", "build", "-tags", "joinertest", "-o", Binary, "./cmd/joiner")
	cmd.Dir = c.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building joiner: %v\n%s", err, out)
	}
	Kube, err = client.New(c.Config, client.Options{Scheme: operator.Scheme()})
	return err
}

// Joiner is a running controller process.
type Joiner struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

// Write collects the process output.
func (j *Joiner) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.logs.Write(p)
}

// Logs returns the output so far.
func (j *Joiner) Logs() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.logs.String()
}

// StartJoiner runs the binary with settings as environment variables; it is
// stopped when the test ends, after the test's own cleanups have run.
func StartJoiner(t testing.TB, env ...string) *Joiner {
	t.Helper()
	return StartJoinerArgs(t, nil, env...)
}

// StartJoinerArgs is StartJoiner with command-line arguments as well, for a
// test of a setting users pass as a flag (a flag wins over its variable).
func StartJoinerArgs(t testing.TB, args []string, env ...string) *Joiner {
	t.Helper()
	j := &Joiner{done: make(chan struct{})}
	j.cmd = exec.Command(Binary, args...)
	j.cmd.Env = append(os.Environ(), "KUBECONFIG="+Cluster.Kubeconfig, "METRICS_PORT=0", "HEALTH_PROBE_PORT=0", "DISABLE_LEADER_ELECTION=true")
	j.cmd.Env = append(j.cmd.Env, env...)
	j.cmd.Stdout, j.cmd.Stderr = j, j
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = j.cmd.Wait(); close(j.done) }()
	t.Cleanup(func() {
		j.Stop(syscall.SIGTERM)
		// JOINER_TEST_LOGS=dir keeps every run's whole log for study.
		if dir := os.Getenv("JOINER_TEST_LOGS"); dir != "" {
			name := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".log")
			if err := os.WriteFile(name, []byte(j.Logs()), 0o644); err != nil {
				t.Logf("keeping the joiner log: %v", err)
			}
		}
		if t.Failed() {
			// The decisions and errors tell why a test failed; the tail is
			// mostly the shutdown. Both, so a CI log is enough to diagnose.
			t.Logf("joiner's decisions and errors:\n%s", TailLines(Decisions(j.Logs()), 150))
			t.Logf("joiner logs:\n%s", TailLines(j.Logs(), 40))
		}
	})
	return j
}

// Decisions keeps the log lines that explain what the controller chose to
// do: the provisioner's and the disruption loop's, and every error.
func Decisions(logs string) string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"logger":"controller.provisioner"`) || strings.Contains(line, `"logger":"controller.disruption"`) ||
			strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// Stop signals the process and waits for it.
func (j *Joiner) Stop(sig syscall.Signal) {
	_ = j.cmd.Process.Signal(sig)
	select {
	case <-j.done:
	case <-time.After(20 * time.Second):
		_ = j.cmd.Process.Kill()
		<-j.done
	}
}

// PID is the controller's process ID, for reading its memory from /proc.
func (j *Joiner) PID() int { return j.cmd.Process.Pid }

// TailLines keeps the last n lines.
func TailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Kubectl runs kubectl against the test cluster, with stdin.
func Kubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(Cluster.Bins.Kubectl, append([]string{"--kubeconfig", Cluster.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Eventually polls cond until it holds or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
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

// ResetCluster deletes what a test created and waits until every NodeClaim
// and the nodes behind them are gone; the controller must still run.
func ResetCluster(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	_ = Kube.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace("default"))
	_ = Kube.DeleteAllOf(ctx, &appsv1.DaemonSet{}, client.InNamespace("default"))
	_ = Kube.DeleteAllOf(ctx, &policyv1.PodDisruptionBudget{}, client.InNamespace("default"))
	_ = Kube.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.GracePeriodSeconds(0))
	_ = Kube.DeleteAllOf(ctx, &v1alpha1.NodeOverlay{})
	_ = Kube.DeleteAllOf(ctx, &autoscalingv1beta1.CapacityBuffer{}, client.InNamespace("default"))
	_ = Kube.DeleteAllOf(ctx, &corev1.PodTemplate{}, client.InNamespace("default"))
	var pools v1.NodePoolList
	_ = Kube.List(ctx, &pools)
	for i := range pools.Items {
		_ = Kube.Delete(ctx, &pools.Items[i])
	}
	var claims v1.NodeClaimList
	_ = Kube.List(ctx, &claims)
	for i := range claims.Items {
		_ = Kube.Delete(ctx, &claims.Items[i])
	}
	Eventually(t, 90*time.Second, "NodeClaims and their nodes to be deleted", func() (bool, string) {
		var claims v1.NodeClaimList
		var nodes corev1.NodeList
		_ = Kube.List(ctx, &claims)
		_ = Kube.List(ctx, &nodes, client.MatchingLabels{"joiner.sh/kwok-instance": "true"})
		return len(claims.Items) == 0 && len(nodes.Items) == 0, fmt.Sprintf("%d nodeclaims, %d nodes", len(claims.Items), len(nodes.Items))
	})
	Kubectl(t, "", "delete", "ec2nodeclasses", "--all", "--ignore-not-found")
	// One delete-collection call: kubectl deletes events one by one.
	_ = Kube.DeleteAllOf(ctx, &corev1.Event{}, client.InNamespace("default"))
}
