package disruption

import (
	"fmt"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Joiner plans where displaced pods could go, but kube-scheduler decides
// where they do go, and its default profile spreads pods onto the least
// allocated nodes rather than packing them. A plan that packs tightly can
// then leave a pod with no node that fits, a new node is launched for it,
// and the next decision finds the same savings again: a replace loop.
// kubeRisk prices that: it replays the displaced pods in several arrival
// orders the way the default profile scores nodes (least allocated,
// balanced), and for the pods left without room in the worst order, prices
// the new capacity the provisioner would launch for them. A command goes
// ahead only when its savings exceed that risk, so even when kube-scheduler
// strands pods the cluster ends cheaper than it was, and no sequence of
// commands can cycle.

type kubeNode struct {
	node  *corev1.Node
	alloc scheduling.Resources
	free  scheduling.Resources
}

// kubeTargets are the nodes displaced pods may land on: existing nodes not
// being removed, and the replacements to launch.
func kubeTargets(snap scheduling.Snapshot, removed map[string]bool, repl []*scheduling.NewNodeClaim) []kubeNode {
	var out []kubeNode
	taints := map[string][]corev1.Taint{}
	for _, p := range snap.NodePools {
		taints[p.NodePool.Name] = p.NodePool.Spec.Template.Spec.Taints
	}
	for _, n := range snap.Nodes {
		if removed[n.Name] || n.MarkedForDeletion || hasDisruptedTaint(n.Taints) {
			continue
		}
		alloc := scheduling.FromResourceList(n.Allocatable)
		free := alloc
		for _, p := range n.Pods {
			free = free.Sub(scheduling.PodRequests(p))
		}
		out = append(out, kubeNode{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}, Spec: corev1.NodeSpec{Taints: n.Taints}}, alloc: alloc, free: free})
	}
	for i, nc := range repl {
		labels := map[string]string{v1.LabelNodePool: nc.NodePool, corev1.LabelTopologyZone: nc.Offering.Zone, v1.LabelCapacityType: nc.Offering.CapacityType}
		for k, v := range nc.InstanceType.Labels {
			labels[k] = v
		}
		alloc := scheduling.FromResourceList(nc.InstanceType.Allocatable)
		// Requests include the DaemonSet pods the node will run.
		free := alloc.Sub(nc.Requests)
		for _, p := range nc.Pods {
			free = free.Add(scheduling.PodRequests(p))
		}
		name := fmt.Sprintf("replacement-%d", i)
		out = append(out, kubeNode{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints[nc.NodePool]}}, alloc: alloc, free: free})
	}
	return out
}

func hasDisruptedTaint(taints []corev1.Taint) bool {
	for _, t := range taints {
		if t.Key == v1.DisruptedNoScheduleTaint.Key {
			return true
		}
	}
	return false
}

// kubeFits reports whether the pods of each draining node (groups) fit on
// targets in every arrival order tried.
func kubeFits(groups [][]*corev1.Pod, targets []kubeNode) bool {
	return len(kubeStranded(groups, targets)) == 0
}

// EvictFirst orders a node's pods for eviction: largest first. The
// ReplicaSets recreate them in about this order and kube-scheduler places
// them in it, and the large pods placed before the small ones is what keeps
// the small ones from taking the gaps the large ones need.
func EvictFirst(a, b *corev1.Pod) bool {
	ra, rb := scheduling.PodRequests(a), scheduling.PodRequests(b)
	if ra.CPU != rb.CPU {
		return ra.CPU > rb.CPU
	}
	return ra.Memory > rb.Memory
}

// kubeStranded returns the pods left without a node in the worst of the
// arrival orders tried. Each draining node evicts largest first; the
// orders are all nodes' pods merged largest first, and the nodes' queues
// taken in turn, as when they drain side by side. Arbitrary orders are not
// tried: smallest first is the adversary of least-allocated scoring and
// would veto nearly every plan that packs at all.
func kubeStranded(groups [][]*corev1.Pod, targets []kubeNode) []*corev1.Pod {
	var pods []*corev1.Pod
	var turns []*corev1.Pod
	sorted := make([][]*corev1.Pod, len(groups))
	for i, g := range groups {
		sorted[i] = append([]*corev1.Pod{}, g...)
		sort.SliceStable(sorted[i], func(a, b int) bool { return EvictFirst(sorted[i][a], sorted[i][b]) })
		pods = append(pods, g...)
	}
	if len(pods) == 0 {
		return nil
	}
	for round := 0; len(turns) < len(pods); round++ {
		for _, g := range sorted {
			if round < len(g) {
				turns = append(turns, g[round])
			}
		}
	}
	merged := append([]*corev1.Pod{}, pods...)
	sort.SliceStable(merged, func(a, b int) bool { return EvictFirst(merged[a], merged[b]) })

	var worst []*corev1.Pod
	worstSize := 0.0
	for _, order := range [][]*corev1.Pod{merged, turns} {
		free := make([]scheduling.Resources, len(targets))
		for i, t := range targets {
			free[i] = t.free
		}
		var stranded []*corev1.Pod
		strandedSize := 0.0
		for _, p := range order {
			req := scheduling.PodRequests(p)
			best, bestScore := -1, -1.0
			for ti, t := range targets {
				if !req.Fits(free[ti]) || !admits(p, t.node) {
					continue
				}
				if s := kubeScore(req, free[ti], t.alloc); s > bestScore {
					best, bestScore = ti, s
				}
			}
			if best < 0 {
				stranded = append(stranded, p)
				strandedSize += float64(req.CPU)/1000 + float64(req.Memory)/(1<<30)/4
				continue
			}
			free[best] = free[best].Sub(req)
		}
		if strandedSize > worstSize {
			worst, worstSize = stranded, strandedSize
		}
	}
	return worst
}

// kubeScore is the default profile's resource scoring: least allocated plus
// balanced allocation, for CPU and memory after placing the pod.
func kubeScore(req, free, alloc scheduling.Resources) float64 {
	if alloc.CPU <= 0 || alloc.Memory <= 0 {
		return 0
	}
	after := free.Sub(req)
	cpu := float64(after.CPU) / float64(alloc.CPU)
	mem := float64(after.Memory) / float64(alloc.Memory)
	diff := cpu - mem
	if diff < 0 {
		diff = -diff
	}
	return (cpu+mem)/2 + (1 - diff/2)
}

// admits checks a pod's node selector, required node affinity and taints.
func admits(p *corev1.Pod, n *corev1.Node) bool {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// movingPods are the pods each of the named nodes would displace.
func movingPods(snap scheduling.Snapshot, names map[string]bool) [][]*corev1.Pod {
	var out [][]*corev1.Pod
	for _, n := range snap.Nodes {
		if !names[n.Name] {
			continue
		}
		var pods []*corev1.Pod
		for _, p := range n.Pods {
			if !isDaemonSetPod(p) {
				pods = append(pods, p)
			}
		}
		out = append(out, pods)
	}
	return out
}
