// Command karpenter-e2e runs Karpenter v1.14.1's own regression suite
// (sigs.k8s.io/karpenter test/suites/regression) unchanged against Joiner:
// `make karpenter-e2e`. It is a conformance test, not a dependency. The
// suite is built from the module proxy in test/karpenter-e2e/suite, a module
// of its own that pins the suite's versions; nothing of Joiner imports it.
//
// It starts the local control plane (kube-apiserver, kube-scheduler,
// kube-controller-manager, etcd, kwok), installs Joiner's CRDs, runs Joiner
// out of cluster with its kwok provider, and runs the suite in three
// groups, each with its default NodePool (the suite's KWOK pins, in EC2
// instance types):
//   - core: every file but the three below; instance-cpu < 32, as the
//     suite's KWOK branch caps instance-size, and no nano or micro sizes:
//     Karpenter's KWOK types hold 16 pods a vCPU, EC2's nano and micro
//     hold 4 pods whatever their size (ENI limits), so a spec's five small
//     pods that fit one KWOK node would rightly take two of the cheapest
//     EC2 nodes;
//   - pinned: nodeclaim_test.go and staticcapacity_test.go on c6a.4xlarge
//     or c6g.4xlarge, the shape of the KWOK pin c-16x;
//   - buffers: capacitybuffer_test.go on c6a.large or c6g.large, the shape
//     of c-2x.
//
// Core runs beside the other two (-parallel, the default), each lane on a
// control plane and a Joiner of its own.
//
// The EC2NodeClass the suite copies for each spec is the default
// nodeclass (--default-nodeclass). Each spec's result, its time and the
// first line of a failure are written to -out (docs/karpenter-e2e.md), and
// the command fails if a spec that is not a named exception fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/joiner-autoscaler/joiner/internal/localcluster"
)

// group is one run of the suite.
type group struct {
	Name  string
	Files string // --ginkgo.focus-file, or "" for all
	Skip  string // --ginkgo.skip-file
	// Requirements are added to the default NodePool's.
	Requirements string
}

var groups = []group{
	{Name: "core", Skip: "nodeclaim_test.go|staticcapacity_test.go|capacitybuffer_test.go",
		Requirements: `- {key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ["32"]}
      - {key: karpenter.k8s.aws/instance-size, operator: NotIn, values: [nano, micro]}`},
	{Name: "pinned", Files: "nodeclaim_test.go|staticcapacity_test.go",
		Requirements: `- {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.4xlarge, c6g.4xlarge]}`},
	{Name: "buffers", Files: "capacitybuffer_test.go",
		Requirements: `- {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.large, c6g.large]}`},
}

// exceptions are the specs that need Karpenter's own internals, with why;
// they are skipped and named in the report.
var exceptions = map[string]string{
	"should update the nodepool-hash annotation on the nodepool and nodeclaim when the nodepool's nodepool-hash-version annotation does not match the controller hash version": "It expects Karpenter's hash of the NodePool template (hashstructure v2, hash version v3) on NodePools and NodeClaims. Joiner stamps its own hash and version (joiner-1) and re-stamps NodeClaims of other versions instead of drifting them (README, Compatibility notes), so that a cluster moving from Karpenter is not churned; matching Karpenter's hash would mean reproducing its hashing library's output.",
}

func main() {
	out := flag.String("out", "docs/karpenter-e2e.md", "the report to write; a relative path is taken from the repository root")
	focus := flag.String("focus", "", "run only specs matching this regular expression (ginkgo --focus)")
	only := flag.String("groups", "core,pinned,buffers", "groups to run")
	gates := flag.String("feature-gates", "NodeRepair=true,StaticCapacity=true,CapacityBuffer=true", "Joiner's FEATURE_GATES, as the suite's upstream run sets Karpenter's")
	timeout := flag.Duration("timeout", 8*time.Hour, "the whole run's limit")
	parallel := flag.Bool("parallel", true, "run core beside the other groups, each lane on a control plane and a Joiner of its own")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelRun := context.WithTimeout(ctx, *timeout)
	defer cancelRun()
	if err := run(ctx, *out, *focus, *only, *gates, *parallel); err != nil {
		fmt.Fprintln(os.Stderr, "karpenter-e2e:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out, focus, only, gates string, parallel bool) error {
	root, err := localcluster.FindRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "karpenter-e2e-")
	if err != nil {
		return err
	}
	logf("work folder %s", work)
	// The commit is the one the binaries are built from, read before the
	// build: work that goes on during the run's hours is not what it tested.
	commit, err := exec.CommandContext(ctx, "git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		commit = []byte("(unknown commit)")
	}
	logf("testing %s", strings.TrimSpace(string(commit)))
	suite := filepath.Join(work, "regression.test")
	logf("building the suite, sigs.k8s.io/karpenter@v1.14.1 test/suites/regression, from the module proxy")
	if err := command(ctx, filepath.Join(root, "test", "karpenter-e2e", "suite"), nil, os.Stderr,
		"go", "test", "-c", "-o", suite, "sigs.k8s.io/karpenter/test/suites/regression"); err != nil {
		return fmt.Errorf("building the suite: %w", err)
	}
	joiner := filepath.Join(work, "joiner")
	if err := command(ctx, root, nil, os.Stderr, "go", "build", "-o", joiner, "./cmd/joiner"); err != nil {
		return fmt.Errorf("building joiner: %w", err)
	}
	started := time.Now()
	results, err := runLanes(ctx, root, work, suite, joiner, gates, focus, lanes(selected(only), parallel))
	if err != nil {
		return err
	}
	results = merged(results)
	report := render(results, gates, strings.TrimSpace(string(commit)), time.Since(started))
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
		return err
	}
	logf("report written to %s; Joiner's logs are in %s", out, work)
	if n := failed(results); n > 0 {
		return fmt.Errorf("%d spec(s) failed (%s)", n, out)
	}
	return nil
}

// startJoiner runs the controller as a user would run it out of cluster on
// the kwok provider, with its output in logPath.
func startJoiner(ctx context.Context, binary, kubeconfig, gates, logPath string) (func(), error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, binary)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "CLOUD_PROVIDER=kwok", "FEATURE_GATES="+gates,
		// The suite's chaos specs start a controller-runtime manager of
		// their own on :8080; Joiner's ports are left to the kernel.
		"METRICS_PORT=0", "HEALTH_PROBE_PORT=0", "DISABLE_LEADER_ELECTION=true")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logFile.Close()
	}, nil
}

// runGroup writes the group's default NodePool and runs the suite with it.
func runGroup(ctx context.Context, suite, work, kubeconfig string, g group, focus string) ([]result, error) {
	dir := filepath.Join(work, g.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	nodeClass, nodePool := filepath.Join(dir, "nodeclass.yaml"), filepath.Join(dir, "nodepool.yaml")
	if err := os.WriteFile(nodeClass, []byte(defaultNodeClass), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(nodePool, []byte(strings.Replace(defaultNodePool, "      requirements:\n", "      requirements:\n      "+g.Requirements+"\n", 1)), 0o644); err != nil {
		return nil, err
	}
	report := filepath.Join(dir, "report.json")
	args := []string{"-test.v", "-test.timeout", "0",
		"--default-nodeclass=" + nodeClass, "--default-nodepool=" + nodePool,
		"--ginkgo.timeout=8h", "--ginkgo.grace-period=15m", "--ginkgo.v", "--ginkgo.no-color", "--ginkgo.seed=1",
		"--ginkgo.json-report=" + report}
	if g.Files != "" {
		args = append(args, "--ginkgo.focus-file="+g.Files)
	}
	if g.Skip != "" {
		args = append(args, "--ginkgo.skip-file="+g.Skip)
	}
	if focus != "" {
		args = append(args, "--ginkgo.focus="+focus)
	}
	var skips []string
	for name := range exceptions {
		skips = append(skips, regexpQuote(name))
	}
	args = append(args, "--ginkgo.skip="+strings.Join(skips, "|"))
	logf("group %s: %s", g.Name, strings.Join(args, " "))
	logFile, err := os.Create(filepath.Join(dir, "suite.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	// A failing spec fails the binary; the report says which.
	_ = command(ctx, dir, []string{"KUBECONFIG=" + kubeconfig, "OUTPUT_DIR=" + dir}, logFile, suite, args...)
	rs, err := readReport(report, g.Name)
	if err != nil {
		return nil, fmt.Errorf("%w (the suite's output is in %s)", err, logFile.Name())
	}
	logf("group %s: %s", g.Name, tally(rs))
	return rs, nil
}

func command(ctx context.Context, dir string, env []string, out *os.File, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

const defaultNodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-regression
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: regression}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: regression}}]
`

// defaultNodePool is the suite's own default NodePool (its
// default_nodepool.yaml) with the EC2NodeClass reference; the suite sets
// the reference again to each spec's copy of the class.
const defaultNodePool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: Never
    budgets: [{nodes: 100%}]
  limits: {cpu: 10000, memory: 8000Gi}
  template:
    spec:
      expireAfter: Never
      requirements:
      - {key: kubernetes.io/os, operator: In, values: [linux]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`
