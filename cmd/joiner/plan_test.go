package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 36's NodeOverlay acceptance, offline: the guide's scale-up plans a
// c6a.2xlarge at list prices; an overlay halving m5's price makes m5 the
// cheapest, and the plan says both prices and that the overlay applied.
// A conflicting pair at one weight applies only the one that wins.
func TestPlanWithNodeOverlays(t *testing.T) {
	guide := filepath.Join("..", "..", "test", "testdata", "seed-manifests", "03-scale-up-down.yaml")
	half := `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: m5-half}
spec:
  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]
  priceAdjustment: "-50%"
`
	tie := `---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: m5-free}
spec:
  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]
  price: "0"
`
	cases := []struct {
		name      string
		overlays  string
		wantType  string
		wantPrice float64
		wantList  float64
		verdicts  map[string]string
	}{
		{"no overlay", "", "c6a.2xlarge", 0.306, 0.306, nil},
		{"m5 at -50%", half, "m5.2xlarge", 0.192, 0.384, map[string]string{"m5-half": "ValidationSucceeded"}},
		// At equal weight the later name wins and the other conflicts.
		{"two at one weight", half + tie, "m5.2xlarge", 0.192, 0.384, map[string]string{"m5-half": "ValidationSucceeded", "m5-free": "Conflict"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"plan", "-f", guide, "-o", "json"}
			if tc.overlays != "" {
				file := filepath.Join(t.TempDir(), "overlays.yaml")
				if err := os.WriteFile(file, []byte(tc.overlays), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-f", file)
			}
			out, stderr, err := run(t, "", args...)
			if err != nil {
				t.Fatalf("%v: %s", err, stderr)
			}
			var doc Document
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if len(doc.NodeClaims) != 1 {
				t.Fatalf("%d NodeClaims: %s", len(doc.NodeClaims), out)
			}
			nc := doc.NodeClaims[0]
			if nc.InstanceType != tc.wantType || nc.PricePerHour != tc.wantPrice || nc.ListPricePerHour != tc.wantList {
				t.Errorf("planned %s at $%g (list $%g), want %s at $%g (list $%g)", nc.InstanceType, nc.PricePerHour, nc.ListPricePerHour, tc.wantType, tc.wantPrice, tc.wantList)
			}
			got := map[string]string{}
			for _, o := range doc.NodeOverlays {
				got[o.Name] = o.Reason
			}
			if len(got) != len(tc.verdicts) {
				t.Errorf("overlay verdicts %v, want %v", got, tc.verdicts)
			}
			for name, want := range tc.verdicts {
				if got[name] != want {
					t.Errorf("overlay %s: %q, want %q", name, got[name], want)
				}
			}
		})
	}
	table, _, err := run(t, "", "plan", "-f", guide, "-f", writeTemp(t, half+tie))
	if err != nil || !strings.Contains(table, `nodeoverlay "m5-free" not applied (Conflict): conflict with another overlay`) {
		t.Errorf("the table does not name the conflict (%v):\n%s", err, table)
	}
}

func writeTemp(t *testing.T, body string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestPlanRefusesPDBs: joiner plan evicts nothing, so a PDB in its input
// would be accepted and ignored; it is refused, naming simulate.
func TestPlanRefusesPDBs(t *testing.T) {
	pdb := filepath.Join(t.TempDir(), "pdb.yaml")
	if err := os.WriteFile(pdb, []byte("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec: {maxUnavailable: 0, selector: {matchLabels: {app: web}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"with a PDB", []string{"plan", "-f", "../../pkg/simulate/testdata/nodepool.yaml", "-f", pdb}, "PodDisruptionBudget default/web: a plan evicts nothing"},
		{"without", []string{"plan", "-f", "../../pkg/simulate/testdata/nodepool.yaml"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, "", tc.args...)
			if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}
