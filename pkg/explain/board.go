// Package explain keeps the disruption controller's last word on each
// node and serves it on the metrics port, so that `joiner explain` reads
// what the decision code decided, not a second model of it.
package explain

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// Verdicts a node can get from a disruption pass.
const (
	// Disrupting: the pass's command removes or replaces the node.
	Disrupting = "disrupting"
	// Movable: a move was found, but another command went first this pass.
	Movable = "movable"
	// Kept: the node is a candidate and Reason says why it stays.
	Kept = "kept"
)

// Node is what the last pass decided about one node.
type Node struct {
	Node      string `json:"node"`
	NodeClaim string `json:"nodeClaim,omitempty"`
	NodePool  string `json:"nodePool,omitempty"`
	Verdict   string `json:"verdict"`
	// Reason is why the node stays (Kept), or the command's reason
	// (Underutilized, Empty, Drifted).
	Reason string `json:"reason,omitempty"`
	// Move is what the command does with the node: "delete", or
	// "replace with <type> (<capacity type>, <zone>)".
	Move string `json:"move,omitempty"`
	// SavingPerHour is what the whole command saves, $/h.
	SavingPerHour float64   `json:"savingPerHour,omitempty"`
	DecidedAt     time.Time `json:"decidedAt"`
}

// Pod is why the last provisioning batch could not place a pod.
type Pod struct {
	// Pod is namespace/name.
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
	// Pools is why each NodePool could not run it, when none could.
	Pools     []scheduling.PoolReason `json:"nodePools,omitempty"`
	DecidedAt time.Time               `json:"decidedAt"`
}

// Board holds the last disruption pass's verdicts and the last
// provisioning batch's pods left pending. Its zero value is ready.
type Board struct {
	mu    sync.RWMutex
	nodes map[string]Node
	at    time.Time
	pods  map[string]Pod
}

// RecordPods replaces the pods left pending with one batch's.
func (b *Board) RecordPods(at time.Time, pods []Pod) {
	m := make(map[string]Pod, len(pods))
	for _, p := range pods {
		p.DecidedAt = at
		m[p.Pod] = p
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pods = m
}

// Pod is why the last batch left the pod (namespace/name) pending, if it
// did.
func (b *Board) Pod(key string) (Pod, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	p, ok := b.pods[key]
	return p, ok
}

// Record replaces the board with one pass's verdicts, each decided at at
// unless it says when it was (a verdict carried over from an earlier pass).
func (b *Board) Record(at time.Time, nodes []Node) {
	m := make(map[string]Node, len(nodes))
	for _, n := range nodes {
		if n.DecidedAt.IsZero() {
			n.DecidedAt = at
		}
		m[n.Node] = n
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nodes, b.at = m, at
}

// Node is the verdict on the named node, if the last pass had one.
func (b *Board) Node(name string) (Node, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	n, ok := b.nodes[name]
	return n, ok
}

// Nodes are every verdict of the last pass, by node name, and when it ran
// (zero before the first).
func (b *Board) Nodes() ([]Node, time.Time) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]Node, 0, len(b.nodes))
	for _, n := range b.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Node, b.Node) })
	return out, b.at
}

// Path is where the board is served on the metrics port: Path for every
// node, Path + NAME for one.
const Path = "/explain/nodes/"

// PodsPath + NAMESPACE/NAME serves why the last batch left a pod pending.
const PodsPath = "/explain/pods/"

// ServeHTTP serves the board as JSON: GET Path lists every verdict
// ({"decidedAt": ..., "nodes": [...]}), GET Path+NAME one, GET
// PodsPath+NAMESPACE/NAME a pod left pending (404 with a message when the
// board has nothing on it).
func (b *Board) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if key, ok := strings.CutPrefix(r.URL.Path, PodsPath); ok {
		p, found := b.Pod(key)
		answer(w, p, found, NotPending(key))
		return
	}
	name := strings.TrimPrefix(r.URL.Path, Path)
	if name == "" {
		nodes, at := b.Nodes()
		_ = json.NewEncoder(w).Encode(struct {
			DecidedAt time.Time `json:"decidedAt"`
			Nodes     []Node    `json:"nodes"`
		}{at, nodes})
		return
	}
	n, ok := b.Node(name)
	answer(w, n, ok, NotConsidered(name))
}

// answer writes v, or when not found a 404 whose error says why.
func answer(w http.ResponseWriter, v any, found bool, why string) {
	if !found {
		w.WriteHeader(http.StatusNotFound)
		v = map[string]string{"error": why}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// NotConsidered says why the board has nothing on a node: the last pass
// saw no NodeClaim of it (a node Joiner did not launch, or one whose
// NodeClaim has not registered it yet), or no pass has run.
func NotConsidered(name string) string {
	return "the last disruption pass saw no NodeClaim of node " + name +
		": Joiner did not launch it, its NodeClaim has not registered it yet, or no pass has run since the controller started"
}

// NotPending says why the board has nothing on a pod: the last
// provisioning batch placed it, or did not see it pending.
func NotPending(key string) string {
	return "the last provisioning batch left no pod " + key + " pending: it was planned onto a node or a NodeClaim, is bound already, or does not exist (kubectl describe pod shows its events)"
}
