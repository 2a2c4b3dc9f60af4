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

// Board holds the last pass's verdicts. Its zero value is ready.
type Board struct {
	mu    sync.RWMutex
	nodes map[string]Node
	at    time.Time
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

// ServeHTTP serves the board as JSON: GET Path lists every verdict
// ({"decidedAt": ..., "nodes": [...]}), GET Path+NAME one (404 with a
// message when the last pass had none for it).
func (b *Board) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
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
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": NotConsidered(name)})
		return
	}
	_ = json.NewEncoder(w).Encode(n)
}

// NotConsidered says why the board has nothing on a node: the last pass
// saw no NodeClaim of it (a node Joiner did not launch, or one whose
// NodeClaim has not registered it yet), or no pass has run.
func NotConsidered(name string) string {
	return "the last disruption pass saw no NodeClaim of node " + name +
		": Joiner did not launch it, its NodeClaim has not registered it yet, or no pass has run since the controller started"
}
