package install

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// karpenterCRDChart is Karpenter v1.14.1's own karpenter-crd chart, from
// the Go module proxy: the chart a migrating cluster's CRDs came from. It
// is a fixture of this test, never part of Joiner.
func karpenterCRDChart(t *testing.T) string {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), "go", "mod", "download", "-json", "github.com/aws/karpenter-provider-aws@v1.14.1")
	cmd.Dir = t.TempDir() // outside Joiner's module: nothing is added to it
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download github.com/aws/karpenter-provider-aws@v1.14.1: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %v\n%s", err, out)
	}
	return filepath.Join(mod.Dir, "charts", "karpenter-crd")
}

// TestCRDTakeoverKeepsObjects follows docs/install.md's migration of the
// CRDs' Helm ownership: a cluster whose CRDs came from Karpenter's
// karpenter-crd release, a NodePool in it; joiner-crd takes the CRDs
// over; the karpenter-crd release is retired the documented way (its
// release record deleted, not "helm uninstall", which would delete the
// CRDs and every NodePool with them); the NodePool is still there. Then
// "helm uninstall joiner-crd" keeps the CRDs too (helm.sh/resource-policy:
// keep), and the NodePool with them.
func TestCRDTakeoverKeepsObjects(t *testing.T) {
	const ns = "crd-takeover"
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, err := run(t, strings.NewReader(stdin), cluster.Bins.Kubectl, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	kubectl("", "create", "namespace", ns)
	t.Cleanup(func() {
		_, _ = run(t, nil, cluster.Bins.Kubectl, "delete", "nodepool", "survivor", "--ignore-not-found")
	})
	if out, err := helm(t, "install", "karpenter-crd", karpenterCRDChart(t), "--namespace", ns, "--take-ownership"); err != nil {
		t.Fatalf("helm install karpenter-crd (Karpenter's chart): %v\n%s", err, out)
	}
	kubectl(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: survivor}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
`, "apply", "-f", "-")

	if out, err := helm(t, "upgrade", "--install", "joiner-crd", chart("joiner-crd"), "--namespace", ns, "--take-ownership"); err != nil {
		t.Fatalf("helm install joiner-crd --take-ownership: %v\n%s", err, out)
	}
	// docs/install.md's retirement of the old release.
	kubectl("", "delete", "secret", "--namespace", ns, "-l", "owner=helm,name=karpenter-crd")
	if out, _ := helm(t, "list", "--namespace", ns, "-q"); strings.Contains(out, "karpenter-crd") || !strings.Contains(out, "joiner-crd") {
		t.Fatalf("helm list after the retirement:\n%s", out)
	}
	if got := kubectl("", "get", "nodepool", "survivor", "-o", "name"); strings.TrimSpace(got) != "nodepool.karpenter.sh/survivor" {
		t.Fatalf("the NodePool after the takeover: %q", got)
	}
	for _, crd := range []string{"nodepools.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"} {
		if got := kubectl("", "get", "crd", crd, "-o", `jsonpath={.metadata.annotations.helm\.sh/resource-policy}`); got != "keep" {
			t.Errorf("%s's helm.sh/resource-policy is %q after the takeover, want keep", crd, got)
		}
	}

	if out, err := helm(t, "uninstall", "joiner-crd", "--namespace", ns, "--wait"); err != nil {
		t.Fatalf("helm uninstall joiner-crd: %v\n%s", err, out)
	}
	if got := kubectl("", "get", "nodepool", "survivor", "-o", "name"); strings.TrimSpace(got) != "nodepool.karpenter.sh/survivor" {
		t.Fatalf("the NodePool after helm uninstall joiner-crd: %q", got)
	}
}
