package crds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSeedManifests applies the guides' manifests with kubectl's default
// strict field validation, as users do, and expects what a cluster with
// Karpenter v1 CRDs does.
func TestSeedManifests(t *testing.T) {
	dir := filepath.Join(cluster.Root, "test", "testdata", "seed-manifests")
	cases := []struct {
		file string
		// created lists the objects kubectl must report as created.
		created []string
		// errs are substrings of kubectl's error output; none means success.
		errs []string
	}{
		{file: "01-t4g-spot-nodepool.yaml",
			created: []string{"ec2nodeclass.karpenter.k8s.aws/default created"},
			errs:    []string{`unknown field "spec.limit"`}},
		{file: "02-spot-tainted-nodepool.yaml",
			created: []string{"ec2nodeclass.karpenter.k8s.aws/spot-class created", "nodepool.karpenter.sh/spot created", "deployment.apps/spot-workload created"}},
		{file: "03-scale-up-down.yaml",
			created: []string{"nodepool.karpenter.sh/default created", "ec2nodeclass.karpenter.k8s.aws/default created", "deployment.apps/inflate created"}},
		{file: "04-spot-to-spot.yaml",
			created: []string{"nodepool.karpenter.sh/default created"},
			errs:    []string{"spec.subnetSelectorTerms: Required value", "spec.securityGroupSelectorTerms: Required value"}},
		{file: "05-legacy-v1alpha5.yaml",
			errs: []string{
				`no matches for kind "Provisioner" in version "karpenter.sh/v1alpha5"`,
				`no matches for kind "AWSNodeTemplate" in version "karpenter.k8s.aws/v1alpha1"`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			if _, err := os.Stat(path); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = kubectl(t, "delete", "--ignore-not-found", "--wait=false", "-f", path) })
			out, err := kubectl(t, "apply", "-f", path)
			if len(tc.errs) == 0 && err != nil {
				t.Fatalf("kubectl apply failed: %v\n%s", err, out)
			}
			if len(tc.errs) > 0 && err == nil {
				t.Fatalf("kubectl apply succeeded, want errors %q\n%s", tc.errs, out)
			}
			for _, want := range append(tc.created, tc.errs...) {
				if !strings.Contains(out, want) {
					t.Errorf("kubectl output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestPrinterColumns checks the columns of kubectl get, plain and -o wide.
func TestPrinterColumns(t *testing.T) {
	for f, body := range map[string]string{
		"nodepool.yaml": baseNodePool, "nodeclaim.yaml": baseNodeClaim, "ec2nodeclass.yaml": baseEC2NodeClass,
		"nodeoverlay.yaml": baseNodeOverlay, "capacitybuffer.yaml": strings.Replace(baseCapacityBuffer, "metadata: {", "metadata: {namespace: default, ", 1),
	} {
		path := filepath.Join(t.TempDir(), f)
		if err := os.WriteFile(path, []byte(strings.Replace(body, "name: base", "name: columns", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := kubectl(t, "apply", "-f", path); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		t.Cleanup(func() { _, _ = kubectl(t, "delete", "--ignore-not-found", "-f", path) })
	}
	cases := []struct {
		args    []string
		headers []string
	}{
		{[]string{"get", "nodepools"}, []string{"NAME NODECLASS NODES READY AGE"}},
		{[]string{"get", "nodepools", "-o", "wide"}, []string{"NAME NODECLASS NODES READY AGE WEIGHT CPU MEMORY"}},
		{[]string{"get", "nodeclaims"}, []string{"NAME TYPE CAPACITY ZONE NODE READY AGE"}},
		{[]string{"get", "nodeclaims", "-o", "wide"}, []string{"NAME TYPE CAPACITY ZONE NODE READY AGE IMAGEID ID NODEPOOL NODECLASS DRIFTED"}},
		{[]string{"get", "ec2nodeclasses"}, []string{"NAME READY AGE"}},
		{[]string{"get", "ec2nodeclasses", "-o", "wide"}, []string{"NAME READY AGE ROLE"}},
		{[]string{"get", "ec2nc"}, []string{"NAME READY AGE"}},
		{[]string{"get", "nodepools,nodeclaims,ec2nodeclasses"}, []string{
			"NAME NODECLASS NODES READY AGE", "NAME TYPE CAPACITY ZONE NODE READY AGE", "NAME READY AGE",
		}},
		{[]string{"get", "nodepools,nodeclaims,ec2nodeclasses", "-o", "wide"}, []string{
			"NAME NODECLASS NODES READY AGE WEIGHT CPU MEMORY",
			"NAME TYPE CAPACITY ZONE NODE READY AGE IMAGEID ID NODEPOOL NODECLASS DRIFTED",
			"NAME READY AGE ROLE",
		}},
		{[]string{"get", "nodeoverlays"}, []string{"NAME READY AGE"}},
		{[]string{"get", "overlays", "-o", "wide"}, []string{"NAME READY AGE WEIGHT"}},
		{[]string{"get", "capacitybuffers", "-n", "default"}, []string{"NAME STRATEGY PODTEMPLATE REPLICAS CONDITIONSTYPE CONDITIONSSTATUS CONDITIONSREASON AGE"}},
		{[]string{"get", "cb", "-n", "default"}, []string{"columns buffer.x-k8s.io/active-capacity"}},
		{[]string{"get", "karpenter"}, []string{"nodepool.karpenter.sh/columns", "nodeclaim.karpenter.sh/columns", "ec2nodeclass.karpenter.k8s.aws/columns", "nodeoverlay.karpenter.sh/columns"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := kubectl(t, tc.args...)
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			var lines []string
			for _, l := range strings.Split(out, "\n") {
				lines = append(lines, strings.Join(strings.Fields(l), " "))
			}
			flat := strings.Join(lines, "\n")
			for _, h := range tc.headers {
				if !strings.Contains(flat, h) {
					t.Errorf("missing %q in:\n%s", h, out)
				}
			}
		})
	}
}

// TestScaleSubresource checks that NodePools expose /scale as Karpenter's do.
func TestScaleSubresource(t *testing.T) {
	out, err := kubectl(t, "get", "--raw", "/apis/karpenter.sh/v1")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{`"name":"nodepools/scale"`, `"name":"nodepools/status"`, `"name":"nodeclaims/status"`} {
		if !strings.Contains(out, want) {
			t.Errorf("discovery lacks %s", want)
		}
	}
}
