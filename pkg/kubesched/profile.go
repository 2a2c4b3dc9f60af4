package kubesched

import (
	"math"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The default profile's score plugins that tell nodes apart for a pod
// with no inter-pod terms, host ports or volumes, with their weights
// (kube-scheduler's default_plugins.go). Each scores 0 to maxNodeScore in
// whole numbers, as kube-scheduler does: the rounding makes ties, of which
// Pick takes the first where kube-scheduler draws one at random.
const (
	maxNodeScore = 100

	weightFit          = 1 // NodeResourcesFit, LeastAllocated
	weightBalanced     = 1 // NodeResourcesBalancedAllocation
	weightSpread       = 2 // PodTopologySpread, its system defaults
	weightNodeAffinity = 2 // NodeAffinity, preferred terms
	weightTaints       = 3 // TaintToleration, PreferNoSchedule taints
)

// systemSpread are PodTopologySpread's system default constraints, which
// kube-scheduler scores for a pod that gives none of its own and that a
// ReplicaSet or StatefulSet selects: at most 3 more of its siblings on one
// node than another, 5 in one zone, both ScheduleAnyway.
var systemSpread = []struct {
	key     string
	maxSkew int64
}{{corev1.LabelHostname, 3}, {corev1.LabelTopologyZone, 5}}

// Pick is the node the default profile binds p (requesting req) to: among
// the nodes that fit and admit it, the highest weighted sum of the scores
// above, the first of equals. siblings(i) counts the pods on nodes[i] that
// the system spreading counts with p (its ReplicaSet's or StatefulSet's);
// nil when p has no such owner (a bare Pod, a Job's), so none applies.
// -1 when no node can take p.
//
// Not modelled: requests counted as kube-scheduler's NonZeroRequested (a
// container without requests counts 100m and 200Mi), and the sampling of
// at most 100 feasible nodes on larger clusters.
func Pick(p *corev1.Pod, req resources.Resources, nodes []Node, siblings func(i int) int) int {
	aff := nodeaffinity.GetRequiredNodeAffinity(p)
	var feasible []int
	for i := range nodes {
		if Fits(req, nodes[i].Free) && Admits(aff, p, nodes[i].Node) {
			feasible = append(feasible, i)
		}
	}
	if len(feasible) == 0 {
		return -1
	}
	total := make([]int64, len(feasible))
	for k, i := range feasible {
		total[k] = weightFit*leastAllocated(req, nodes[i]) + weightBalanced*balanced(req, nodes[i])
	}
	// TaintToleration: the fewest untolerated PreferNoSchedule taints.
	taints := make([]int64, len(feasible))
	for k, i := range feasible {
		taints[k] = untoleratedPreferNoSchedule(p, nodes[i].Node)
	}
	addNormalized(total, taints, weightTaints, true)
	// NodeAffinity: the preferred terms' weights a node matches.
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		if terms, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err == nil {
			prefs := make([]int64, len(feasible))
			for k, i := range feasible {
				prefs[k] = terms.Score(nodes[i].Node)
			}
			addNormalized(total, prefs, weightNodeAffinity, false)
		}
	}
	if siblings != nil && len(p.Spec.TopologySpreadConstraints) == 0 {
		spread := spreadScores(aff, nodes, feasible, siblings)
		for k := range total {
			total[k] += weightSpread * spread[k]
		}
	}
	best := 0
	for k := range total {
		if total[k] > total[best] {
			best = k
		}
	}
	return feasible[best]
}

// leastAllocated is NodeResourcesFit's LeastAllocated score of n for a pod
// requesting req: the share of CPU and of memory left free, out of 100,
// averaged.
func leastAllocated(req resources.Resources, n Node) int64 {
	score := func(requested, alloc int64) int64 {
		if alloc <= 0 || requested > alloc {
			return 0
		}
		return (alloc - requested) * maxNodeScore / alloc
	}
	cpu := score(n.Alloc.CPU-n.Free.CPU+req.CPU, n.Alloc.CPU)
	mem := score(n.Alloc.Memory-n.Free.Memory+req.Memory, n.Alloc.Memory)
	return (cpu + mem) / 2
}

// balanced is NodeResourcesBalancedAllocation's score: 100 less the
// standard deviation of the CPU and memory shares used, out of 100.
func balanced(req resources.Resources, n Node) int64 {
	if n.Alloc.CPU <= 0 || n.Alloc.Memory <= 0 {
		return 0
	}
	cpu := min(float64(n.Alloc.CPU-n.Free.CPU+req.CPU)/float64(n.Alloc.CPU), 1)
	mem := min(float64(n.Alloc.Memory-n.Free.Memory+req.Memory)/float64(n.Alloc.Memory), 1)
	return int64((1 - math.Abs(cpu-mem)/2) * maxNodeScore)
}

// untoleratedPreferNoSchedule counts n's PreferNoSchedule taints that p's
// tolerations of that effect (or of any) do not tolerate.
func untoleratedPreferNoSchedule(p *corev1.Pod, n *corev1.Node) int64 {
	var tolerations []corev1.Toleration
	for _, t := range p.Spec.Tolerations {
		if t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule {
			tolerations = append(tolerations, t)
		}
	}
	var count int64
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !corev1helpers.TolerationsTolerateTaint(klog.Background(), tolerations, t, false) {
			count++
		}
	}
	return count
}

// addNormalized adds weight times raw normalized as kube-scheduler's
// DefaultNormalizeScore does: scaled so the highest is 100, and reversed
// (100 less that) when fewer is better.
func addNormalized(total, raw []int64, weight int64, reverse bool) {
	var most int64
	for _, r := range raw {
		most = max(most, r)
	}
	for k, r := range raw {
		score := int64(0)
		if most > 0 {
			score = maxNodeScore * r / most
		}
		if reverse {
			score = maxNodeScore - score
		}
		total[k] += weight * score
	}
}

// spreadScores are PodTopologySpread's normalized scores of the feasible
// nodes under the system constraints: each node's raw score is, for each
// constraint whose key it has, its domain's sibling count weighted by the
// log of the number of domains plus 2, plus maxSkew-1; normalized, the
// fewest siblings score highest. Zones are those of the feasible nodes,
// counted over every node the pod's required affinity admits.
func spreadScores(aff nodeaffinity.RequiredNodeAffinity, nodes []Node, feasible []int, siblings func(i int) int) []int64 {
	zones := map[string]int64{}
	for _, i := range feasible {
		zones[nodes[i].Node.Labels[corev1.LabelTopologyZone]] = 0
	}
	for i := range nodes {
		z, ok := nodes[i].Node.Labels[corev1.LabelTopologyZone]
		if _, counted := zones[z]; !ok || !counted {
			continue
		}
		if match, _ := aff.Match(nodes[i].Node); match {
			zones[z] += int64(siblings(i))
		}
	}
	raw := make([]int64, len(feasible))
	lowest, highest := int64(math.MaxInt64), int64(0)
	for k, i := range feasible {
		score := 0.0
		for _, c := range systemSpread {
			value, ok := nodes[i].Node.Labels[c.key]
			if !ok {
				continue
			}
			domains, count := len(zones), zones[value]
			if c.key == corev1.LabelHostname {
				domains, count = len(feasible), int64(siblings(i))
			}
			score += float64(count)*math.Log(float64(domains+2)) + float64(c.maxSkew-1)
		}
		raw[k] = int64(math.Round(score))
		lowest, highest = min(lowest, raw[k]), max(highest, raw[k])
	}
	out := make([]int64, len(feasible))
	for k := range raw {
		out[k] = maxNodeScore
		if highest > 0 {
			out[k] = maxNodeScore * (highest + lowest - raw[k]) / highest
		}
	}
	return out
}
