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

// InFlightClaim is the NodeClaim a snapshot node name made by InFlightName
// stands for, if it is one.
func InFlightClaim(name string) (string, bool) { return strings.CutPrefix(name, inFlightPrefix) }

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
	// targets are where each pod was nominated last, and when.
	targets map[string]target
	// pruned is when lapsed nominations and targets were last dropped.
	pruned time.Time
}

type nomination struct {
	pods  map[string]struct{}
	until time.Time
}

type target struct {
	key string
	at  time.Time
}

// TargetFor is how long a pod's nomination still tells later plans where
// the pod goes (Targets): REGISTRATION_TTL's default, as long as a launched
// node may take to join before it is given up. The Window, which protects
// the node from disruption, is far shorter; but batches come more than a
// Window apart when the API server is slow (three minutes apart in scale
// run 11), and a plan that has forgotten where its pods go launches for
// them again.
const TargetFor = 15 * time.Minute

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
	if claim, ok := InFlightClaim(name); ok {
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
		n.byName, n.targets = map[string]nomination{}, map[string]target{}
	}
	// A batch nominates each node it plans onto; pruning once a Window,
	// not on each of those calls, keeps a batch linear in the nodes.
	if !now.Before(n.pruned.Add(n.Window)) {
		n.prune(now)
	}
	cur, ok := n.byName[key]
	if !ok || !now.Before(cur.until) {
		// A lapsed nomination starts again with these pods alone.
		cur = nomination{pods: map[string]struct{}{}}
	}
	for _, p := range pods {
		pod := p.Namespace + "/" + p.Name
		cur.pods[pod] = struct{}{}
		n.targets[pod] = target{key: key, at: now}
	}
	cur.until = now.Add(n.Window)
	n.byName[key] = cur
}

// prune drops nominations past their window, and targets past TargetFor.
func (n *Nominations) prune(now time.Time) {
	n.pruned = now
	for k, v := range n.byName {
		if !now.Before(v.until) {
			delete(n.byName, k)
		}
	}
	for p, t := range n.targets {
		if !now.Before(t.at.Add(TargetFor)) {
			delete(n.targets, p)
		}
	}
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

// Targets returns, for each pod (namespace/name) nominated within
// TargetFor, what it was nominated for last: a later batch may have planned
// it onto another node.
func (n *Nominations) Targets() map[string]Target {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.Clock.Now()
	out := make(map[string]Target, len(n.targets))
	for p, t := range n.targets {
		if !now.Before(t.at.Add(TargetFor)) {
			continue
		}
		if claim, ok := strings.CutPrefix(t.key, "nodeclaim:"); ok {
			out[p] = Target{NodeClaim: claim}
		} else {
			out[p] = Target{Node: strings.TrimPrefix(t.key, "node:")}
		}
	}
	return out
}
