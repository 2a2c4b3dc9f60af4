package explain

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// TestBoardServes: the board serves the last pass's verdicts, all or one,
// replaces them with the next pass's, and names a node it has nothing on.
func TestBoardServes(t *testing.T) {
	var b Board
	first := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b.Record(first, []Node{{Node: "b", Verdict: Kept, Reason: "node has \"karpenter.sh/do-not-disrupt: true\""}, {Node: "a", Verdict: Disrupting, Move: "delete"}})
	b.Record(first.Add(time.Minute), []Node{{Node: "b", Verdict: Kept, Reason: "PDB default/web blocks the eviction of pod default/web-1 (0 disruptions allowed)"}})
	srv := httptest.NewServer(&b)
	defer srv.Close()
	cases := []struct {
		path   string
		status int
		want   string
	}{
		{path: Path, status: 200, want: `"nodes":[{"node":"b","verdict":"kept","reason":"PDB default/web`},
		{path: Path + "b", status: 200, want: `"decidedAt":"2026-01-01T12:01:00Z"`},
		{path: Path + "a", status: 404, want: NotConsidered("a")},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body json.RawMessage
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("GET %s: %d %s, want %d with %s", tc.path, resp.StatusCode, body, tc.status, tc.want)
			}
		})
	}
}

// TestBoardServesPods: a pod the last batch left pending is served with
// each pool's reason; the next batch's record replaces it.
func TestBoardServesPods(t *testing.T) {
	var b Board
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b.RecordPods(at, []Pod{{Pod: "default/old", Reason: "x"}})
	b.RecordPods(at, []Pod{{Pod: "default/web-1", Reason: "no NodePool can run the pod", Pools: []scheduling.PoolReason{{NodePool: "spot", Reason: "incompatible requirements"}}}})
	srv := httptest.NewServer(&b)
	defer srv.Close()
	for _, tc := range []struct {
		key    string
		status int
		want   string
	}{
		{"default/web-1", 200, `"nodePools":[{"nodePool":"spot","reason":"incompatible requirements"}]`},
		{"default/old", 404, NotPending("default/old")},
	} {
		resp, err := http.Get(srv.URL + PodsPath + tc.key)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s: %d %s, want %d with %s", tc.key, resp.StatusCode, body, tc.status, tc.want)
		}
	}
}
