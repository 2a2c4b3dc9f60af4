package disruption

import (
	"math"
	"sort"
	"strconv"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"
)

// ScaleDown picks the n NodeClaims a static NodePool drops when its
// replicas go down, in the order that costs its workloads least, as
// Karpenter orders them: NodeClaims not launched yet, then empty nodes
// (DaemonSet and mirror pods only), then the rest by how much moving their
// pods costs, weighted by the life they have left, with nodes holding a
// do-not-disrupt pod last of all. Scaling down is the owner's order: no
// budget holds it, and the drain still honours PDBs and do-not-disrupt.
// podsByNode are the pods on each claim's node.
func ScaleDown(claims []*v1.NodeClaim, podsByNode map[string][]*corev1.Pod, n int, now time.Time) []*v1.NodeClaim {
	type ranked struct {
		nc    *v1.NodeClaim
		tier  int
		cost  float64
		since time.Time
	}
	rs := make([]ranked, 0, len(claims))
	for _, nc := range claims {
		r := ranked{nc: nc, since: nc.CreationTimestamp.Time}
		onNode := podsByNode[nc.Status.NodeName]
		switch {
		case nc.Status.ProviderID == "":
			r.tier = 0
		case busy(onNode, now) == 0:
			r.tier = 1
		case protected(onNode, now):
			r.tier = 3
			r.cost = rescheduleCost(onNode, now) * lifeLeft(nc, now)
		default:
			r.tier = 2
			r.cost = rescheduleCost(onNode, now) * lifeLeft(nc, now)
		}
		rs = append(rs, r)
	}
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.tier != b.tier {
			return a.tier < b.tier
		}
		if a.cost != b.cost {
			return a.cost < b.cost
		}
		if !a.since.Equal(b.since) {
			return a.since.Before(b.since)
		}
		return a.nc.Name < b.nc.Name
	})
	out := make([]*v1.NodeClaim, 0, n)
	for i := 0; i < n && i < len(rs); i++ {
		out = append(out, rs[i].nc)
	}
	return out
}

// busy counts the pods a drain would move: not the node's own, not done.
func busy(onNode []*corev1.Pod, now time.Time) int {
	n := 0
	for _, p := range onNode {
		if !pods.IsOwnedByNode(p) && !pods.IsTerminal(p) {
			n++
		}
	}
	return n
}

// protected: a pod on the node may not be disrupted now.
func protected(onNode []*corev1.Pod, now time.Time) bool {
	for _, p := range onNode {
		if !pods.IsTerminal(p) && pods.DoNotDisrupt(p, now) {
			return true
		}
	}
	return false
}

// rescheduleCost sums what moving each pod costs: 1, raised by the pod's
// deletion cost (controller.kubernetes.io/pod-deletion-cost, which
// ReplicaSets also read) and priority, each pod's share kept within
// [-10, 10] so one cannot outweigh a node's worth of others.
func rescheduleCost(onNode []*corev1.Pod, now time.Time) float64 {
	total := 0.0
	for _, p := range onNode {
		if pods.IsOwnedByNode(p) || pods.IsTerminal(p) {
			continue
		}
		cost := 1.0
		if v, ok := p.Annotations[corev1.PodDeletionCost]; ok {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				cost += n / math.Pow(2, 27)
			}
		}
		if p.Spec.Priority != nil {
			cost += float64(*p.Spec.Priority) / math.Pow(2, 25)
		}
		total += math.Max(-10, math.Min(10, cost))
	}
	return total
}

// lifeLeft is the share of its expireAfter the NodeClaim has left, 1 when
// it never expires: an older node costs less to give up.
func lifeLeft(nc *v1.NodeClaim, now time.Time) float64 {
	d := nc.Spec.ExpireAfter.Duration
	if d == nil || *d <= 0 {
		return 1
	}
	left := float64(*d-now.Sub(nc.CreationTimestamp.Time)) / float64(*d)
	return math.Max(0, math.Min(1, left))
}
