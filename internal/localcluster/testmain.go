package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Main runs a test package against one control plane, shared by all its
// tests, and returns the exit code for os.Exit. It reuses the cluster named
// by JOINER_TEST_KUBECONFIG when set (after installing our CRDs there), and
// otherwise starts a fresh one that is stopped when the tests end. A control
// plane that cannot start fails the package; it is never skipped.
//
// setup, when given, runs once after the control plane is up, for
// package-wide fixtures such as building a binary.
func Main(m *testing.M, out **Cluster, setup ...func(*Cluster) error) int {
	return MainWith(m, out, Options{}, setup...)
}

// MainAudited is Main with the apiserver's audit log of AuditedUser
// (Cluster.AuditLog), for a package that checks which RBAC rules a
// controller used.
func MainAudited(m *testing.M, out **Cluster, setup ...func(*Cluster) error) int {
	return MainWith(m, out, Options{Audit: true}, setup...)
}

// MainWith is Main with the control plane's options (Dir and Root are
// chosen here).
func MainWith(m *testing.M, out **Cluster, opts Options, setup ...func(*Cluster) error) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := forTests(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "local control plane:", err)
		return 1
	}
	*out = c
	for _, f := range setup {
		if err := f(c); err != nil {
			fmt.Fprintln(os.Stderr, "test setup:", err)
			c.Stop()
			return 1
		}
	}
	code := m.Run()
	c.Stop()
	if code == 0 && c.Dir != "" && os.Getenv("JOINER_KEEP_CLUSTER_DIR") == "" {
		os.RemoveAll(c.Dir)
	} else if code != 0 && c.Dir != "" {
		fmt.Fprintf(os.Stderr, "control plane logs kept in %s\n", filepath.Join(c.Dir, "logs"))
	}
	return code
}

func forTests(ctx context.Context, opts Options) (*Cluster, error) {
	root, err := FindRoot()
	if err != nil {
		return nil, err
	}
	if kc := os.Getenv("JOINER_TEST_KUBECONFIG"); kc != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			return nil, err
		}
		cfg.QPS, cfg.Burst = 500, 1000
		bins, err := EnsureBinaries(ctx, root)
		if err != nil {
			return nil, err
		}
		if err := InstallCRDs(ctx, cfg, filepath.Join(root, "config", "crd")); err != nil {
			return nil, err
		}
		return &Cluster{Root: root, Kubeconfig: kc, Config: cfg, Bins: bins}, nil
	}
	dir, err := os.MkdirTemp("", "joiner-cluster-")
	if err != nil {
		return nil, err
	}
	opts.Dir, opts.Root = dir, root
	return Start(ctx, opts)
}
