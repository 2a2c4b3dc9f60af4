package disruption

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sim is a small, deterministic stand-in for a cluster under Joiner's
// disruption loop: consolidation decides, the command's candidates go, and
// their pods are rescheduled the way kube-scheduler's default profile would
// (least allocated, balanced), with new capacity planned for any that do not
// fit. It shows, in milliseconds, where the end-to-end multi-node test will
// land, and how many times pods get moved on the way.
type sim struct {
	pool   scheduling.NodePool
	nodes  []*simNode
	next   int
	moves  map[string]int
	steps  int
	budget func(nodes int) int
	log    func(string)
	// cautious, as the controller, once a risky command left pods pending.
	cautious bool
	stranded int
	strikes  int
	repacks  int
}

type simNode struct {
	*scheduling.Node
	cand Candidate
	free scheduling.Resources
}

func newSim(np *v1.NodePool) *sim {
	return &sim{pool: scheduling.NodePool{NodePool: np, InstanceTypes: catalogTypes()}, moves: map[string]int{}}
}

func (s *sim) snapshot() (scheduling.Snapshot, []Candidate) {
	snap := scheduling.Snapshot{NodePools: []scheduling.NodePool{s.pool}}
	var cands []Candidate
	for _, n := range s.nodes {
		snap.Nodes = append(snap.Nodes, n.Node)
		cands = append(cands, n.cand)
	}
	return snap, cands
}

// launch adds an empty node for a planned NodeClaim.
func (s *sim) launch(nc *scheduling.NewNodeClaim) *simNode {
	s.next++
	name := fmt.Sprintf("node-%04d", s.next)
	labels := map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: nc.Offering.Zone, v1.LabelCapacityType: nc.Offering.CapacityType, v1.LabelNodePool: nc.NodePool}
	for k, v := range nc.InstanceType.Labels {
		labels[k] = v
	}
	n := &simNode{
		Node: &scheduling.Node{Name: name, Labels: labels, Allocatable: nc.InstanceType.Allocatable, NodePool: nc.NodePool},
		cand: Candidate{Node: name, NodeClaim: name, NodePool: nc.NodePool, InstanceType: nc.InstanceType.Name, CapacityType: nc.Offering.CapacityType, Price: nc.Price()},
		free: scheduling.FromResourceList(nc.InstanceType.Allocatable),
	}
	s.nodes = append(s.nodes, n)
	return n
}

func (s *sim) bind(n *simNode, p *corev1.Pod) {
	p.Spec.NodeName = n.Name
	n.Pods = append(n.Pods, p)
	n.free = n.free.Sub(scheduling.PodRequests(p))
}

// provision plans pending pods the way the provisioner does and binds
// them where the plan says.
func (s *sim) provision(pending []*corev1.Pod) {
	snap, _ := s.snapshot()
	snap.Pods = pending
	plan := scheduling.Solve(snap, scheduling.Options{})
	byName := map[string]*simNode{}
	for _, n := range s.nodes {
		byName[n.Name] = n
	}
	for _, p := range pending {
		if name, ok := plan.Existing[p.Namespace+"/"+p.Name]; ok {
			s.bind(byName[name], p)
		}
	}
	for _, nc := range plan.NewNodeClaims {
		n := s.launch(nc)
		for _, p := range nc.Pods {
			s.bind(n, p)
		}
	}
}

// schedule places pods as kube-scheduler's default scoring would: the node
// that stays least allocated and most balanced.
func (s *sim) schedule(pods []*corev1.Pod) int {
	var pending []*corev1.Pod
	for _, p := range pods {
		req := scheduling.PodRequests(p)
		var best *simNode
		bestScore := -1.0
		for _, n := range s.nodes {
			if !req.Fits(n.free) {
				continue
			}
			// kube-scheduler also spreads a ReplicaSet's pods across
			// nodes (the default topology spread constraints).
			same := 0
			for _, q := range n.Pods {
				if q.Labels["app"] == p.Labels["app"] {
					same++
				}
			}
			score := kubeScore(req, n.free, scheduling.FromResourceList(n.Allocatable)) - 0.01*float64(same)
			if score > bestScore {
				best, bestScore = n, score
			}
		}
		if best == nil {
			p.Spec.NodeName = ""
			pending = append(pending, p)
			continue
		}
		s.bind(best, p)
	}
	if len(pending) > 0 {
		if s.log != nil {
			s.log(fmt.Sprintf("%d pods pending", len(pending)))
		}
		s.provision(pending)
	}
	return len(pending)
}

// step runs one decision and carries out its first command, as the
// controller does; false when there was nothing to do.
func (s *sim) step() bool {
	snap, cands := s.snapshot()
	allowed := s.budget(len(s.nodes))
	d := Consolidate(snap, cands, Options{Allowed: map[string]int{"default": allowed}, Cautious: s.cautious})
	if len(d.Commands) == 0 {
		return false
	}
	s.steps++
	cmd := d.Commands[0]
	if len(cmd.Candidates) > 1 && len(cmd.Replacements) > 0 {
		s.repacks++
	}
	if s.log != nil {
		s.log(summary(Decision{Commands: []Command{cmd}})[0])
	}
	for _, nc := range cmd.Replacements {
		s.launch(nc)
	}
	gone := map[string]bool{}
	for _, c := range cmd.Candidates {
		gone[c.Node] = true
	}
	// Each node evicts largest first; the nodes drain side by side.
	var queues [][]*corev1.Pod
	var kept []*simNode
	for _, n := range s.nodes {
		if !gone[n.Name] {
			kept = append(kept, n)
			continue
		}
		q := append([]*corev1.Pod{}, n.Pods...)
		sort.SliceStable(q, func(i, j int) bool { return EvictFirst(q[i], q[j]) })
		for _, p := range q {
			s.moves[p.Name]++
		}
		queues = append(queues, q)
	}
	s.nodes = kept
	var moving []*corev1.Pod
	for round := 0; ; round++ {
		added := false
		for _, q := range queues {
			if round < len(q) {
				moving = append(moving, q[round])
				added = true
			}
		}
		if !added {
			break
		}
	}
	if pending := s.schedule(moving); pending > 0 && cmd.Risk > 0 {
		s.strikes++
		s.cautious = s.strikes >= 3
		s.stranded += pending
	}
	return true
}

func (s *sim) price() float64 {
	total := 0.0
	for _, n := range s.nodes {
		total += n.cand.Price
	}
	return total
}

func (s *sim) bound(t testing.TB) float64 {
	var pods []*corev1.Pod
	for _, n := range s.nodes {
		for _, p := range n.Pods {
			c := p.DeepCopy()
			c.Spec.NodeName = ""
			pods = append(pods, c)
		}
	}
	b, err := scheduling.LowerBound(scheduling.Snapshot{Pods: pods, NodePools: []scheduling.NodePool{s.pool}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scaleDown removes pods of a deployment down to keep, as the ReplicaSet
// controller ranks them: first from the node with the most of its pods.
func (s *sim) scaleDown(app string, keep int) {
	for {
		count := map[*simNode]int{}
		total := 0
		for _, n := range s.nodes {
			for _, p := range n.Pods {
				if p.Labels["app"] == app {
					count[n]++
					total++
				}
			}
		}
		if total <= keep {
			return
		}
		var most *simNode
		for _, n := range s.nodes {
			if most == nil || count[n] > count[most] {
				most = n
			}
		}
		for i := len(most.Pods) - 1; i >= 0; i-- {
			if p := most.Pods[i]; p.Labels["app"] == app {
				most.free = most.free.Add(scheduling.PodRequests(p))
				most.Pods = append(most.Pods[:i], most.Pods[i+1:]...)
				break
			}
		}
	}
}

func deploymentPods(app string, n int, cpu, mem string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		p := pod(fmt.Sprintf("%s-%03d", app, i), cpu, mem)
		p.Labels = map[string]string{"app": app}
		p.CreationTimestamp = metav1.NewTime(time.Unix(0, 0))
		out = append(out, p)
	}
	return out
}

// TestScaleDownConvergence replays the multi-node acceptance offline: 1,000
// pods of four shapes, scaled to 20%, consolidated one command at a time
// under the default 10% budget.
func TestScaleDownConvergence(t *testing.T) {
	for _, batch := range []int{1000, 20} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) { testScaleDown(t, batch) })
	}
}

func testScaleDown(t *testing.T, batch int) {
	np := nodePool("default", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	s := newSim(np)
	s.budget = func(nodes int) int { return (nodes + 9) / 10 }
	shapes := [][2]string{{"2", "1Gi"}, {"500m", "4Gi"}, {"1", "2Gi"}, {"250m", "256Mi"}}
	var pending []*corev1.Pod
	for i, sh := range shapes {
		pending = append(pending, deploymentPods(fmt.Sprintf("load-%d", i), 250, sh[0], sh[1])...)
	}
	// Pods arrive over time, as ReplicaSets create them, in interleaved
	// batches; each batch is planned against the nodes already there.
	r := rand.New(rand.NewSource(3))
	r.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
	for len(pending) > 0 {
		n := min(batch, len(pending))
		s.provision(pending[:n])
		pending = pending[n:]
	}
	before := len(s.nodes)
	for i := range shapes {
		s.scaleDown(fmt.Sprintf("load-%d", i), 50)
	}
	bound := s.bound(t)
	t.Logf("1,000 pods on %d nodes, scaled to 200: $%.3f/h, %.3fx the bound $%.3f/h", before, s.price(), s.price()/bound, bound)
	for s.steps < 200 && s.step() {
	}
	most, total := 0, 0
	for _, m := range s.moves {
		total += m
		most = max(most, m)
	}
	var types []string
	pods := 0
	for _, n := range s.nodes {
		types = append(types, fmt.Sprintf("%s(%d)", n.cand.InstanceType, len(n.Pods)))
		pods += len(n.Pods)
	}
	sort.Strings(types)
	ratio := s.price() / s.bound(t)
	t.Logf("converged after %d commands (%d repacks): %d nodes %s; $%.3f/h, %.3fx; %d moves, %.2f per pod, at most %d; %d pods stranded, cautious=%v",
		s.steps, s.repacks, len(s.nodes), strings.Join(types, " "), s.price(), ratio, total, float64(total)/200, most, s.stranded, s.cautious)
	if pods != 200 {
		t.Errorf("%d pods on nodes, want 200", pods)
	}
	if s.steps >= 200 {
		t.Errorf("no convergence after %d commands: a replace loop", s.steps)
	}
	if ratio > 1.15 {
		t.Errorf("%.3fx the LP bound, want at most 1.15", ratio)
	}
	if float64(total) > 2*200 {
		t.Errorf("%d moves for 200 pods, want at most two per pod on average", total)
	}
}
