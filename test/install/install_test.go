package install

import (
	"strings"
	"testing"
)

// The rendered manifest, with the guides' values, passes the apiserver's
// own validation (a server-side dry run), and the chart ships the five
// CRDs of Karpenter v1.14.1's chart.
func TestServerSideDryRun(t *testing.T) {
	out, err := render(t, "--include-crds", "-f", "testdata/guide001-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws",
		"nodeoverlays.karpenter.sh", "capacitybuffers.autoscaling.x-k8s.io"} {
		if !strings.Contains(out, "name: "+crd) {
			t.Errorf("the chart's crds/ lacks %s", crd)
		}
	}
	res, err := run(t, strings.NewReader(out), cluster.Bins.Kubectl, "apply", "--dry-run=server", "--server-side", "--force-conflicts", "-f", "-")
	if err != nil {
		t.Fatalf("server-side dry run: %v\n%s", err, res)
	}
	for _, want := range []string{"deployment.apps/karpenter", "clusterrole.rbac.authorization.k8s.io/karpenter", "role.rbac.authorization.k8s.io/karpenter-dns",
		"service/karpenter", "serviceaccount/karpenter", "customresourcedefinition.apiextensions.k8s.io/nodepools.karpenter.sh"} {
		if !strings.Contains(res, want) {
			t.Errorf("dry run did not take %s:\n%s", want, res)
		}
	}
}

// helm install puts the RBAC, Deployment, PDB and Service in place; the
// joiner-crd chart takes over CRDs that are already there (a cluster that
// ran Karpenter has them), as helm upgrade then upgrades them.
func TestHelmInstall(t *testing.T) {
	const ns = "joiner-install"
	if out, err := helm(t, "install", "joiner", chart("joiner"), "--namespace", ns, "--create-namespace", "--set", "settings.clusterName=demo"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := helm(t, "uninstall", "joiner", "--namespace", ns, "--wait"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})
	for _, obj := range []string{"deployment/joiner", "poddisruptionbudget/joiner", "service/joiner", "serviceaccount/joiner", "role/joiner", "rolebinding/joiner"} {
		if out, err := run(t, nil, cluster.Bins.Kubectl, "get", "--namespace", ns, obj); err != nil {
			t.Errorf("%s after helm install: %v\n%s", obj, err, out)
		}
	}
	for _, obj := range []string{"clusterrole/joiner", "clusterrolebinding/joiner", "--namespace=kube-system role/joiner-dns", "--namespace=kube-system rolebinding/joiner-dns"} {
		if out, err := run(t, nil, cluster.Bins.Kubectl, append([]string{"get"}, strings.Fields(obj)...)...); err != nil {
			t.Errorf("%s after helm install: %v\n%s", obj, err, out)
		}
	}
	// The service account may do what the controller does, and no more.
	can := func(verb, resource string) bool {
		args := []string{"auth", "can-i", verb, resource, "--as", "system:serviceaccount:" + ns + ":joiner", "--namespace", ns}
		if r, sub, ok := strings.Cut(resource, "/"); ok {
			args[3] = r
			args = append(args, "--subresource", sub)
		}
		out, _ := run(t, nil, cluster.Bins.Kubectl, args...)
		return strings.TrimSpace(out) == "yes"
	}
	for _, tc := range []struct {
		verb, resource string
		want           bool
	}{
		{"create", "nodeclaims.karpenter.sh", true},
		{"create", "pods/eviction", true},
		{"patch", "ec2nodeclasses.karpenter.k8s.aws/status", true},
		{"update", "leases.coordination.k8s.io", true},
		{"update", "ec2nodeclasses.karpenter.k8s.aws/status", false},
		{"patch", "nodes/status", false},
		{"create", "nodes", false},
		{"create", "pods", false},
		{"get", "secrets", false},
		{"delete", "nodepools.karpenter.sh", false},
	} {
		if got := can(tc.verb, tc.resource); got != tc.want {
			t.Errorf("can %s %s: %t, want %t", tc.verb, tc.resource, got, tc.want)
		}
	}

	if out, err := helm(t, "upgrade", "--install", "joiner-crd", chart("joiner-crd"), "--namespace", ns, "--take-ownership"); err != nil {
		t.Fatalf("helm install joiner-crd over existing CRDs: %v\n%s", err, out)
	}
	out, err := run(t, nil, cluster.Bins.Kubectl, "get", "crd", "nodepools.karpenter.sh", "-o", "jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-name}")
	if err != nil || out != "joiner-crd" {
		t.Errorf("nodepools.karpenter.sh belongs to release %q (%v), want joiner-crd", out, err)
	}
}
