// Package localcluster runs a real Kubernetes control plane on loopback:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok as
// the kubelet of fake nodes. Integration tests start one per package; the demo
// starts a persistent one under .cache/cluster.
package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
	// podCIDR only labels kwok's fake pods; nothing ever connects to it.
	podCIDR = "10.244.0.1/16"
)

// Options configure a control plane.
type Options struct {
	// Dir holds certificates, the kubeconfig, logs and pid files.
	Dir string
	// Root is the repository root; found from the working directory when empty.
	Root string
	// Persistent leaves the processes running after this Go process exits, for
	// the demo. Otherwise they are killed with it.
	Persistent bool
	// Stdout receives progress lines; nil discards them.
	Progress func(format string, args ...any)
	// Audit records AuditedUser's requests in the cluster's AuditLog.
	Audit bool
	// NodeLease is how long kwok's node leases last, 40 s (a kubelet's)
	// when zero. kwok renews them at a quarter of that, and the node
	// lifecycle controller's grace period is 10 s longer. The apiserver of
	// a 2-core machine running a thousand kwok nodes cannot take a renewal
	// of each every 10 s besides the rest, and lets nodes go NotReady:
	// test/scale asks for 2 minutes.
	NodeLease time.Duration
}

// AuditedUser is the one user the control plane's audit log records: the
// service account the chart makes for a release named as the guides name
// it (karpenter, in kube-system).
const AuditedUser = "system:serviceaccount:kube-system:karpenter"

const auditPolicyYAML = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: ["` + AuditedUser + `"]
  - level: None
`

// Cluster is a running control plane.
type Cluster struct {
	Dir string
	// AuditLog is the apiserver's audit log (JSON lines) of AuditedUser's
	// requests, under Options.Audit; empty otherwise, and for a cluster
	// this process did not start.
	AuditLog   string
	Root       string
	Kubeconfig string
	Config     *rest.Config
	Bins       Binaries

	procs    []*process
	etcdData string
}

type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Start builds or finds the binaries, starts every component and waits until
// the apiserver is ready, the controller manager works and our CRDs are
// established.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	root := opts.Root
	if root == "" {
		if root, err = FindRoot(); err != nil {
			return nil, err
		}
	}
	bins, err := EnsureBinaries(ctx, root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	cluster := &Cluster{Dir: opts.Dir, Root: root, Bins: bins, Kubeconfig: filepath.Join(opts.Dir, "kubeconfig")}
	c = cluster
	defer func() {
		if err != nil {
			cluster.Stop() // c is nil here: the error return cleared it
		}
	}()
	p, err := writePKI(filepath.Join(opts.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort, kcmPort, schedPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]

	// etcd's fsyncs dominate apiserver latency on a small VM; tmpfs makes the
	// control plane fast and nothing here needs durability.
	c.etcdData, err = os.MkdirTemp(shmDir(), "joiner-etcd-")
	if err != nil {
		return nil, err
	}
	progress("starting etcd")
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if err := c.start("etcd", bins.Etcd, opts.Persistent,
		"--name=joiner", "--data-dir="+c.etcdData,
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=joiner="+peerURL, "--quota-backend-bytes=8589934592",
		"--snapshot-count=100000", "--log-level=warn",
	); err != nil {
		return nil, err
	}

	var audit []string
	if opts.Audit {
		// The audit log records only the chart's service account, so that
		// a test can show which of the chart's RBAC rules the controller
		// used (test/aws).
		auditPolicy := filepath.Join(c.Dir, "audit-policy.yaml")
		c.AuditLog = filepath.Join(c.Dir, "logs", "audit.log")
		if err := os.WriteFile(auditPolicy, []byte(auditPolicyYAML), 0o644); err != nil {
			return nil, err
		}
		audit = []string{"--audit-policy-file=" + auditPolicy, "--audit-log-path=" + c.AuditLog, "--audit-log-format=json"}
	}
	const draFeatureGate = "--feature-gates=DynamicResourceAllocation=true"
	progress("starting kube-apiserver")
	if err := c.start("kube-apiserver", bins.APIServer, opts.Persistent, append(audit,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+p.serverCert, "--tls-private-key-file="+p.serverKey,
		"--client-ca-file="+p.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p.saPub, "--service-account-signing-key-file="+p.saKey,
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC", "--allow-privileged=true",
		// The kubernetes Service would point at 127.0.0.1, which Endpoints reject.
		"--endpoint-reconciler-type=none",
		"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
		"--enable-priority-and-fairness=false",
		// DRA is beta and off in v1.33: without it the API server drops
		// pods' resourceClaims, and nothing could test that Joiner leaves
		// pods with claims alone, as Karpenter does.
		draFeatureGate, "--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true",
		"--v=1",
	)...); err != nil {
		return nil, err
	}
	if err := writeKubeconfig(c.Kubeconfig, "https://127.0.0.1:"+strconv.Itoa(apiPort), p); err != nil {
		return nil, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, err
	}
	// client-go caches TLS transports by certificate file path; a restarted
	// cluster reuses the paths with new keys, so pin the contents instead.
	if err := rest.LoadTLSFiles(c.Config); err != nil {
		return nil, err
	}
	c.Config.QPS, c.Config.Burst = 500, 1000
	if err := c.waitReady(ctx, 90*time.Second); err != nil {
		return nil, err
	}

	lease := opts.NodeLease
	if lease == 0 {
		lease = 40 * time.Second
	}
	progress("starting kube-controller-manager, kube-scheduler and kwok")
	if err := c.start("kube-controller-manager", bins.ControllerManager, opts.Persistent,
		"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort),
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--service-account-private-key-file="+p.saKey, "--root-ca-file="+p.caCert,
		// The node lifecycle controller removes the not-ready taint once kwok
		// reports a fake node Ready; without it pods never schedule there.
		"--controllers=*,nodelifecycle",
		"--node-monitor-period=2s",
		"--node-monitor-grace-period="+(lease+10*time.Second).String(),
		// The default 20 QPS takes a minute to create a thousand replicas.
		"--kube-api-qps=500", "--kube-api-burst=1000",
		draFeatureGate, "--v=1",
	); err != nil {
		return nil, err
	}
	if err := c.start("kube-scheduler", bins.Scheduler, opts.Persistent,
		"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort),
		"--leader-elect=false", "--kube-api-qps=500", "--kube-api-burst=1000", draFeatureGate, "--v=1",
	); err != nil {
		return nil, err
	}
	if err := c.start("kwok", bins.Kwok, opts.Persistent,
		"--kubeconfig="+c.Kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr="+podCIDR, "--node-ip=127.0.0.1",
		"--server-address=127.0.0.1:"+strconv.Itoa(kwokPort),
		"--node-lease-duration-seconds="+strconv.Itoa(int(lease.Seconds())),
		"--config="+bins.KwokStages,
	); err != nil {
		return nil, err
	}
	if err := c.waitControllerManager(ctx, 90*time.Second); err != nil {
		return nil, err
	}
	progress("installing CRDs")
	if err := InstallCRDs(ctx, c.Config, filepath.Join(root, "config", "crd")); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(name, bin string, persistent bool, args ...string) error {
	logPath := filepath.Join(c.Dir, "logs", name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !persistent {
		// Tests that crash must not leave control planes behind.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return os.WriteFile(filepath.Join(c.Dir, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// exited returns an error naming the first component that died, with the end
// of its log, so a failed start says why.
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %s\n%s", p.name, p.cmd.ProcessState, tail(p.log, 20))
		default:
		}
	}
	return nil
}

func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var last error
	err = poll(ctx, timeout, "kube-apiserver /readyz", c.exited, func() (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		last = err
		return err == nil && string(body) == "ok", nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last error: %v)", err, last)
	}
	return err
}

// waitControllerManager waits for the default ServiceAccount, which the
// controller manager creates and the ServiceAccount admission plugin requires
// before any pod can be created.
func (c *Cluster) waitControllerManager(ctx context.Context, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	return poll(ctx, timeout, "kube-controller-manager (default ServiceAccount)", c.exited, func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(corev1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
}

// Stop ends every component, newest first, and removes etcd's data.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		_ = os.Remove(filepath.Join(c.Dir, p.name+".pid"))
	}
	c.procs = nil
	if c.etcdData != "" {
		_ = os.RemoveAll(c.etcdData)
	}
}

// StopDir stops a persistent control plane started in dir by another process.
func StopDir(dir string) error {
	pids, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	var errs []error
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(f), err))
			}
		}
		_ = os.Remove(f)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "etcd-data")); err == nil {
		_ = os.RemoveAll(strings.TrimSpace(string(b)))
	}
	return errors.Join(errs...)
}

// Persist records where etcd keeps its data so StopDir can remove it.
func (c *Cluster) Persist() error {
	return os.WriteFile(filepath.Join(c.Dir, "etcd-data"), []byte(c.etcdData), 0o644)
}

func writeKubeconfig(path, server string, p *pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["joiner-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.caCert}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: p.adminCert, ClientKey: p.adminKey}
	cfg.Contexts["joiner-local"] = &clientcmdapi.Context{Cluster: "joiner-local", AuthInfo: "admin"}
	cfg.CurrentContext = "joiner-local"
	return clientcmd.WriteToFile(*cfg, path)
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func shmDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "joiner-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

func poll(ctx context.Context, timeout time.Duration, what string, died func() error, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if err := died(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

// FindRoot walks up from the working directory to the folder holding go.mod.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (no go.mod above the working directory)")
		}
		dir = parent
	}
}
