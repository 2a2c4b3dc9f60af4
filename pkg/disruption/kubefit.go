package disruption

import (
	"fmt"
	"math"
	"sort"
	"sync"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/kubesched"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
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

// kubeNode is a node the displaced pods may land on.
type kubeNode = kubesched.Node

// kubeModel holds what every risk check of one decision shares: the nodes
// pods may land on, with their free room, and the pods' requests.
type kubeModel struct {
	snap   scheduling.Snapshot
	nodes  []kubeNode
	taints map[string][]corev1.Taint
	reqs   map[*corev1.Pod]resources.Resources
	// interPod is whether any pod has pod (anti-)affinity or topology
	// spread constraints, which make other nodes' pods matter.
	interPod bool
	// sched are the scheduling settings of the plans it makes.
	sched scheduling.Options
	// shared is what the plans risk makes have in common, built for the
	// first of them: each plan built the pools' instance types again, 12
	// of the 90 GB the controller allocated in scale run 8. repack's sets
	// are weighed in parallel, hence the lock.
	shared     *scheduling.Shared
	sharedLock sync.Mutex
}

// kubeTargetCap bounds the existing nodes a replay considers: the ones with
// the most room, where least-allocated scoring sends pods. Leaving the rest
// out can only overstate the risk.
const kubeTargetCap = 256

func newKubeModel(snap scheduling.Snapshot) *kubeModel {
	m := &kubeModel{snap: snap, taints: map[string][]corev1.Taint{}, reqs: map[*corev1.Pod]resources.Resources{}}
	for _, p := range snap.NodePools {
		m.taints[p.NodePool.Name] = p.NodePool.Spec.Template.Spec.Taints
	}
	for _, n := range snap.Nodes {
		// Every pod's requests are worked out here, once, those of nodes
		// going too (their pods move): the model is then only read, by as
		// many of repack's sets at once as there are cores.
		for _, p := range n.Pods {
			m.reqs[p] = resources.PodRequests(p)
		}
		if n.MarkedForDeletion || hasDisruptedTaint(n.Taints) {
			continue
		}
		alloc := resources.FromResourceList(n.Allocatable)
		free := alloc
		for _, p := range n.Pods {
			free = free.Sub(m.req(p))
			if kubesched.InterPod(p) {
				m.interPod = true
			}
		}
		m.nodes = append(m.nodes, kubeNode{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}, Spec: corev1.NodeSpec{Taints: n.Taints}}, Alloc: alloc, Free: free})
	}
	// Most room first, so the cap keeps the likeliest targets.
	sort.SliceStable(m.nodes, func(i, j int) bool { return roomy(m.nodes[i]) > roomy(m.nodes[j]) })
	return m
}

func roomy(n kubeNode) float64 {
	if n.Alloc.CPU <= 0 || n.Alloc.Memory <= 0 {
		return 0
	}
	return float64(n.Free.CPU)/float64(n.Alloc.CPU) + float64(n.Free.Memory)/float64(n.Alloc.Memory)
}

func (m *kubeModel) req(p *corev1.Pod) resources.Resources {
	if r, ok := m.reqs[p]; ok {
		return r
	}
	return resources.PodRequests(p)
}

// targets are the nodes displaced pods may land on: existing nodes not
// being removed, and the replacements to launch.
func (m *kubeModel) targets(removed map[string]bool, repl []*scheduling.NewNodeClaim) []kubeNode {
	var out []kubeNode
	for _, n := range m.nodes {
		if len(out) == kubeTargetCap {
			break
		}
		if !removed[n.Node.Name] {
			out = append(out, n)
		}
	}
	for i, nc := range repl {
		labels := map[string]string{v1.LabelNodePool: nc.NodePool, corev1.LabelTopologyZone: nc.Offering.Zone, v1.LabelCapacityType: nc.Offering.CapacityType}
		for k, v := range nc.InstanceType.Labels {
			labels[k] = v
		}
		alloc := resources.FromResourceList(nc.InstanceType.Allocatable)
		// Requests include the DaemonSet pods the node will run.
		free := alloc.Sub(nc.Requests)
		for _, p := range nc.Pods {
			free = free.Add(m.req(p))
		}
		name := fmt.Sprintf("replacement-%d", i)
		out = append(out, kubeNode{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: m.taints[nc.NodePool]}}, Alloc: alloc, Free: free})
	}
	return out
}

// risk is what the capacity for pods that kube-scheduler might strand
// would cost, $/h, if cands go and repl are launched: zero when every pod
// finds room in every order tried.
func (m *kubeModel) risk(cands []Candidate, repl []*scheduling.NewNodeClaim) float64 {
	removed := map[string]bool{}
	for _, c := range cands {
		removed[c.Node] = true
	}
	stranded := m.stranded(movingPods(m.snap, removed), m.targets(removed, repl))
	if len(stranded) == 0 {
		return 0
	}
	trial := scheduling.Snapshot{NodePools: m.snap.NodePools, DaemonSets: m.snap.DaemonSets, Volumes: m.snap.Volumes, Shared: m.snap.Shared}
	m.sharedLock.Lock()
	if m.shared == nil {
		m.shared = scheduling.Share(trial)
	}
	trial.Shared = m.shared
	m.sharedLock.Unlock()
	for _, p := range stranded {
		trial.Pods = append(trial.Pods, unbound(p))
	}
	plan := scheduling.Solve(trial, m.sched)
	if len(plan.Unschedulable) > 0 {
		return math.Inf(1)
	}
	return plan.TotalPrice()
}

func hasDisruptedTaint(ts []corev1.Taint) bool {
	return taints.Has(ts, v1.DisruptedNoScheduleTaint)
}

// EvictFirst orders a node's pods for eviction: largest first. The
// ReplicaSets recreate them in about this order and kube-scheduler places
// them in it, and the large pods placed before the small ones is what keeps
// the small ones from taking the gaps the large ones need.
func EvictFirst(a, b *corev1.Pod) bool {
	return larger(resources.PodRequests(a), resources.PodRequests(b))
}

func larger(a, b resources.Resources) bool {
	if a.CPU != b.CPU {
		return a.CPU > b.CPU
	}
	return a.Memory > b.Memory
}

// stranded returns the pods left without a node in the worst of the
// arrival orders tried, given the pods of each draining node (groups).
// Each node evicts largest first; the orders are all nodes' pods merged
// largest first, and the nodes' queues taken in turn, as when they drain
// side by side. Arbitrary orders are not tried: smallest first is the
// adversary of least-allocated scoring and would veto nearly every plan
// that packs at all.
func (m *kubeModel) stranded(groups [][]*corev1.Pod, targets []kubeNode) []*corev1.Pod {
	var pods, turns []*corev1.Pod
	sorted := make([][]*corev1.Pod, len(groups))
	for i, g := range groups {
		sorted[i] = append([]*corev1.Pod{}, g...)
		sort.SliceStable(sorted[i], func(a, b int) bool { return m.before(sorted[i][a], sorted[i][b]) })
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
	sort.SliceStable(merged, func(a, b int) bool { return m.before(merged[a], merged[b]) })
	// Whether a target admits a pod is asked at most once per pair, in
	// a dense table: a map keyed by the pair was most of a decision's time.
	const unknown, yes, no = 0, 1, 2
	admitted := make([]uint8, len(pods)*len(targets))
	affinity := make([]*nodeaffinity.RequiredNodeAffinity, len(pods))
	podIdx := make(map[*corev1.Pod]int, len(pods))
	for i, p := range pods {
		podIdx[p] = i
	}

	var worst []*corev1.Pod
	worstSize := 0.0
	for _, order := range [][]*corev1.Pod{merged, turns} {
		free := make([]resources.Resources, len(targets))
		for i, t := range targets {
			free[i] = t.Free
		}
		var stranded []*corev1.Pod
		strandedSize := 0.0
		for _, p := range order {
			req := m.req(p)
			pi := podIdx[p]
			row := admitted[pi*len(targets) : (pi+1)*len(targets)]
			best, bestScore := -1, -1.0
			for ti := range targets {
				f := &free[ti]
				if !kubesched.Fits(req, *f) {
					continue
				}
				if row[ti] == unknown {
					if affinity[pi] == nil {
						a := nodeaffinity.GetRequiredNodeAffinity(p)
						affinity[pi] = &a
					}
					row[ti] = no
					if kubesched.Admits(*affinity[pi], p, targets[ti].Node) {
						row[ti] = yes
					}
				}
				if row[ti] != yes {
					continue
				}
				if s := kubesched.Score(req, *f, targets[ti].Alloc); s > bestScore {
					best, bestScore = ti, s
				}
			}
			if best < 0 {
				stranded = append(stranded, p)
				strandedSize += float64(req.CPU)/1000 + float64(req.Memory)/(1<<30)/4
				continue
			}
			kubesched.Take(&free[best], req)
		}
		if strandedSize > worstSize {
			worst, worstSize = stranded, strandedSize
		}
	}
	return worst
}

// before is EvictFirst on the model's cached requests.
func (m *kubeModel) before(a, b *corev1.Pod) bool { return larger(m.req(a), m.req(b)) }

// movingPods are the pods each of the named nodes would displace.
func movingPods(snap scheduling.Snapshot, names map[string]bool) [][]*corev1.Pod {
	var out [][]*corev1.Pod
	for _, n := range snap.Nodes {
		if !names[n.Name] {
			continue
		}
		var moving []*corev1.Pod
		for _, p := range n.Pods {
			if !pods.IsOwnedByNode(p) {
				moving = append(moving, p)
			}
		}
		out = append(out, moving)
	}
	return out
}
