package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const simPool = "../../pkg/simulate/testdata/nodepool.yaml"

// TestSimulate runs joiner simulate as a user would: bad input names the
// flag or field and the fix; a run writes the report, and a generated
// trace written into --out replays to the same totals with --trace.
func TestSimulate(t *testing.T) {
	dir := t.TempDir()
	badTrace := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badTrace, []byte("duration: 1h\nevents:\n- at: 0s\n  scale: {deployment: nope, replicas: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badCommitments := filepath.Join(dir, "bad-commitments.yaml")
	if err := os.WriteFile(badCommitments, []byte("savingsPlans: [{savingsPlanType: Compute, commitment: 0.5, discount: 30}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"no manifests", []string{"simulate", "--generate", "diurnal", "--out", out}, "pass -f FILE"},
		{"no out", []string{"simulate", "-f", simPool, "--generate", "diurnal"}, "--out"},
		{"no trace", []string{"simulate", "-f", simPool, "--out", out}, "exactly one of --trace FILE and --generate"},
		{"unknown generator", []string{"simulate", "-f", simPool, "--generate", "sine", "--out", out}, `--generate "sine": use one of diurnal, burst or walk`},
		{"bad peak", []string{"simulate", "-f", simPool, "--generate", "walk", "--peak", "0", "--out", out}, "--peak 0: must be positive"},
		{"unknown deployment", []string{"simulate", "-f", simPool, "--trace", badTrace, "--out", out}, "events[0] (at 0s).scale.deployment: Deployment default/nope is not in the manifests"},
		{"bad gate", []string{"simulate", "-f", simPool, "--generate", "walk", "--feature-gates", "Nope=true", "--out", out}, "--feature-gates"},
		{"a discount that is not a share", []string{"simulate", "-f", simPool, "--generate", "walk", "--commitments", badCommitments, "--out", out},
			"--commitments " + badCommitments + ": savingsPlans[0].discount: 30; set the share off on-demand prices, between 0 and 1"},
		{"record without out", []string{"simulate", "record", "--audit-log", badTrace}, "--out: give the directory"},
		{"record an audit log for a while", []string{"simulate", "record", "--audit-log", badTrace, "--for", "1h", "--out", out}, "--for applies to watching a cluster"},
		{"record what is not an audit log", []string{"simulate", "record", "--audit-log", badTrace, "--out", out}, "audit log line 1"},
		{"record a missing audit log", []string{"simulate", "record", "--audit-log", filepath.Join(dir, "nope.log"), "--out", out}, "--audit-log: open"},
		{"runs", []string{"simulate", "-f", simPool, "--generate", "walk", "--peak", "40", "--duration", "2h", "--out", out}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, _, err := run(t, "", tc.args...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stdout, "report: "+filepath.Join(out, "report.html")) {
				t.Errorf("output does not name the report: %s", stdout)
			}
		})
	}
	first := readSummary(t, out)
	again := filepath.Join(dir, "again")
	if _, _, err := run(t, "", "simulate", "-f", simPool, "-f", filepath.Join(out, "workload.yaml"), "--trace", filepath.Join(out, "trace.yaml"), "--out", again); err != nil {
		t.Fatal(err)
	}
	if replay := readSummary(t, again); replay["totalCost"] != first["totalCost"] || replay["evictions"] != first["evictions"] {
		t.Errorf("replaying the written trace gave %v, the generated run %v", replay, first)
	}
	// --compare runs the configurations side by side: each must come out
	// as it does alone.
	both := filepath.Join(dir, "both")
	if _, _, err := run(t, "", "simulate", "-f", simPool, "-f", filepath.Join(out, "workload.yaml"), "--trace", filepath.Join(out, "trace.yaml"),
		"--compare", "../../pkg/simulate/testdata/whenempty.yaml", "--out", both); err != nil {
		t.Fatal(err)
	}
	// Under a Savings Plan the same run costs less on the bill than at
	// list, and says both.
	commitments := filepath.Join(dir, "commitments.yaml")
	if err := os.WriteFile(commitments, []byte("savingsPlans: [{savingsPlanType: Compute, commitment: 0.5, discount: 0.3}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	billed := filepath.Join(dir, "billed")
	if _, _, err := run(t, "", "simulate", "-f", simPool, "-f", filepath.Join(out, "workload.yaml"), "--trace", filepath.Join(out, "trace.yaml"),
		"--commitments", commitments, "--out", billed); err != nil {
		t.Fatal(err)
	}
	if bill := readSummary(t, billed); !(bill["totalCost"].(float64) < bill["listCost"].(float64)) || first["totalCost"] != first["listCost"] {
		t.Errorf("under a Savings Plan the run cost $%v on the bill, $%v at list; without, $%v and $%v", bill["totalCost"], bill["listCost"], first["totalCost"], first["listCost"])
	}
	side := readSummary(t, both)
	configs, _ := side["configurations"].([]any)
	if len(configs) != 2 || side["totalCost"] != first["totalCost"] || side["evictions"] != first["evictions"] || side["nodeHours"] != first["nodeHours"] {
		t.Errorf("beside WhenEmpty the base configuration gave %v (%d configurations), alone %v", side, len(configs), first)
	}
}

func readSummary(t *testing.T, dir string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"totalCost", "lpBoundCost", "nodeHours", "evictions", "pendingSecondsP50", "pendingSecondsP99", "peakNodes"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("summary.json has no %s", k)
		}
	}
	return doc
}
