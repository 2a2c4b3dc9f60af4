package state

import (
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// inFlightPrefix names, in a snapshot, a NodeClaim that has no node yet.
const inFlightPrefix = "nodeclaim/"

// InFlightName is the snapshot's name for a NodeClaim without a node.
func InFlightName(nodeClaim string) string { return inFlightPrefix + nodeClaim }

// Nominations remember which NodeClaims and nodes the provisioner launched,
// or chose, for which pending pods. Until kube-scheduler binds those pods,
// such a node looks empty, or emptier than it is, and voluntary disruption
// must leave it alone: only it, not the whole cluster. The next batch
// plans the pods back onto it (Targets, scheduling.Snapshot.Nominated)
// rather than afresh over every node in flight. A nomination lasts
// Window; the provisioner plans again while the pods wait (every batch and
// resync) and so renews it. Karpenter protects a nominated node the same
// way (see NominationWindow).
//
// They live in memory: after a restart the pending pods themselves keep
// their claim on the capacity in the consolidation model (see
// scheduling.NewCluster), which covers the gap until the next batch.
type Nominations struct {
	Clock  clock.PassiveClock
	Window time.Duration

	mu     sync.Mutex
	byName map[string]nomination
}

type nomination struct {
	pods  map[string]struct{}
	until time.Time
}

// NominationWindow is how long a nomination lasts: Karpenter's twice
// BATCH_MAX_DURATION, at least 10 s, and here at least twice the
// provisioner's resync, so that a nomination the provisioner renews while
// pods wait never lapses in between.
func NominationWindow(batchMax, resync time.Duration) time.Duration {
	return max(2*batchMax, 10*time.Second, 2*resync)
}

// NominateNodeClaim records that a NodeClaim was launched or chosen for pods.
func (n *Nominations) NominateNodeClaim(name string, pods ...*corev1.Pod) {
	n.nominate("nodeclaim:"+name, pods)
}

// NominateNode records that a node was chosen for pods.
func (n *Nominations) NominateNode(name string, pods ...*corev1.Pod) {
	n.nominate("node:"+name, pods)
}

// NominateSnapshotNode records a nomination for a node as a snapshot names
// it: a node, or an in-flight NodeClaim (InFlightName).
func (n *Nominations) NominateSnapshotNode(name string, pods ...*corev1.Pod) {
	if claim, ok := strings.CutPrefix(name, inFlightPrefix); ok {
		n.NominateNodeClaim(claim, pods...)
		return
	}
	n.NominateNode(name, pods...)
}

func (n *Nominations) nominate(key string, pods []*corev1.Pod) {
	if n == nil || len(pods) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.Clock.Now()
	if n.byName == nil {
		n.byName = map[string]nomination{}
	}
	for k, v := range n.byName {
		if !now.Before(v.until) {
			delete(n.byName, k)
		}
	}
	cur, ok := n.byName[key]
	if !ok {
		cur = nomination{pods: map[string]struct{}{}}
	}
	for _, p := range pods {
		cur.pods[p.Namespace+"/"+p.Name] = struct{}{}
	}
	cur.until = now.Add(n.Window)
	n.byName[key] = cur
}

// For returns the pods, sorted, that a node or its NodeClaim is nominated
// for now; none once the window has passed.
func (n *Nominations) For(node, nodeClaim string) []string {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.Clock.Now()
	set := map[string]struct{}{}
	for _, key := range []string{"node:" + node, "nodeclaim:" + nodeClaim} {
		if v, ok := n.byName[key]; ok && now.Before(v.until) {
			for p := range v.pods {
				set[p] = struct{}{}
			}
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Target is what a pod was last nominated for: a node, or a NodeClaim.
type Target struct{ Node, NodeClaim string }

// Targets returns, for each pod (namespace/name) with a nomination in
// force, the one renewed last; between two renewed at once, the NodeClaim's,
// then the first by name. A pod nominated twice was planned onto another
// node by a later batch, and its earlier nomination waits out its window.
func (n *Nominations) Targets() map[string]Target {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.Clock.Now()
	keys := make([]string, 0, len(n.byName))
	for k, v := range n.byName {
		if now.Before(v.until) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := n.byName[keys[i]].until, n.byName[keys[j]].until
		if !a.Equal(b) {
			return a.After(b)
		}
		ai, bi := strings.HasPrefix(keys[i], "nodeclaim:"), strings.HasPrefix(keys[j], "nodeclaim:")
		if ai != bi {
			return ai
		}
		return keys[i] < keys[j]
	})
	out := map[string]Target{}
	for _, k := range keys {
		var t Target
		if claim, ok := strings.CutPrefix(k, "nodeclaim:"); ok {
			t.NodeClaim = claim
		} else {
			t.Node = strings.TrimPrefix(k, "node:")
		}
		for p := range n.byName[k].pods {
			if _, ok := out[p]; !ok {
				out[p] = t
			}
		}
	}
	return out
}
