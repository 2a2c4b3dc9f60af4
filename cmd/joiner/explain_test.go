package main

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/explain"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// TestExplain: explain node prints the controller's word on the node, explain
// pod each NodePool's reason for a pending pod,
// and says what to fix when it has none or cannot be asked.
func TestExplain(t *testing.T) {
	board := &explain.Board{}
	board.Record(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC), []explain.Node{
		{Node: "a", NodeClaim: "default-a", NodePool: "default", Verdict: explain.Disrupting, Reason: "Underutilized", Move: "replace with c6a.large (on-demand, us-east-1a)", SavingPerHour: 0.2295},
		{Node: "b", NodeClaim: "default-b", NodePool: "default", Verdict: explain.Kept, Reason: "PDB default/web blocks the eviction of pod default/web-1 (0 disruptions allowed)"},
		{Node: "s", NodeClaim: "spot-s", NodePool: "spot", Verdict: explain.Kept, Reason: "consolidateAfter (5m) has not passed"},
	})
	board.RecordPods(time.Date(2026, 1, 1, 12, 0, 1, 0, time.UTC), []explain.Pod{{Pod: "default/web-1", Reason: "no NodePool can run the pod: ...",
		Pools: []scheduling.PoolReason{{NodePool: "spot", Reason: `incompatible requirements, key karpenter.sh/capacity-type, karpenter.sh/capacity-type In [on-demand] not in karpenter.sh/capacity-type In [spot]`},
			{NodePool: "gpu", Reason: `did not tolerate taint nvidia.com/gpu=true:NoSchedule`}}}})
	srv := httptest.NewServer(board)
	defer srv.Close()
	cases := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "a move", args: []string{"node", "a", "--endpoint", srv.URL},
			want: "node a (NodeClaim default-a, NodePool default)\n  being disrupted (Underutilized): replace with c6a.large (on-demand, us-east-1a), saving $0.2295/hour\n  decided at 2026-01-01T12:00:00Z\n"},
		{name: "a blocker", args: []string{"node", "b", "--endpoint", srv.URL},
			want: "  kept: PDB default/web blocks the eviction of pod default/web-1 (0 disruptions allowed)\n"},
		{name: "json", args: []string{"node", "b", "--endpoint", srv.URL + "/", "-o", "json"}, want: `"verdict": "kept"`},
		{name: "a node the pass did not see", args: []string{"node", "c", "--endpoint", srv.URL}, wantErr: explain.NotConsidered("c")},
		{name: "not a URL", args: []string{"node", "a", "--endpoint", "localhost:8080"}, wantErr: `--endpoint "localhost:8080" is not a URL`},
		{name: "nothing there", args: []string{"node", "a", "--endpoint", "http://127.0.0.1:1"}, wantErr: "is its metrics port forwarded there"},
		{name: "an output it does not write", args: []string{"node", "a", "--endpoint", srv.URL, "-o", "yaml"}, wantErr: `-o "yaml": give text or json`},
		{name: "a pending pod", args: []string{"pod", "default/web-1", "--endpoint", srv.URL},
			want: "pod default/web-1: pending\n  nodepool \"spot\": incompatible requirements, key karpenter.sh/capacity-type, karpenter.sh/capacity-type In [on-demand] not in karpenter.sh/capacity-type In [spot]\n  nodepool \"gpu\": did not tolerate taint nvidia.com/gpu=true:NoSchedule\n  decided at 2026-01-01T12:00:01Z\n"},
		{name: "a pod not left pending", args: []string{"pod", "default/web-2", "--endpoint", srv.URL}, wantErr: explain.NotPending("default/web-2")},
		{name: "a NodeClaim", args: []string{"nodeclaim", "default-b", "--endpoint", srv.URL},
			want: "node b (NodeClaim default-b, NodePool default)\n  kept: PDB default/web"},
		{name: "a NodeClaim the pass did not see", args: []string{"nodeclaim", "default-z", "--endpoint", srv.URL}, wantErr: "saw no node of NodeClaim default-z"},
		{name: "a NodePool", args: []string{"nodepool", "default", "--endpoint", srv.URL},
			want: "nodepool default: 2 node(s) in the last disruption pass (2026-01-01T12:00:00Z)\n  next disruption (Underutilized, now): node a, replace with c6a.large (on-demand, us-east-1a), saving $0.2295/hour\n  node b kept: PDB default/web blocks"},
		{name: "a NodePool with nothing to do", args: []string{"nodepool", "spot", "--endpoint", srv.URL},
			want: "  next disruption: none; every node stays\n  node s kept: consolidateAfter (5m) has not passed\n"},
		{name: "a NodePool the pass did not see", args: []string{"nodepool", "gpu", "--endpoint", srv.URL}, wantErr: "saw no node of NodePool gpu"},
		{name: "a pod without its namespace", args: []string{"pod", "web-1", "--endpoint", srv.URL}, wantErr: `give it as NAMESPACE/NAME`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newExplainCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case !strings.Contains(out.String(), tc.want):
				t.Errorf("printed %q, want %q in it", out.String(), tc.want)
			}
		})
	}
}
