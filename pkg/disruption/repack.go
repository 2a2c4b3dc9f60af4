package disruption

import (
	"slices"
	"sort"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// repackSizes are the set sizes repack tries: enough to find the
// few-into-fewer merges that single-node moves cannot reach, without
// planning every prefix of a large cluster.
var repackSizes = []int{1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96, 128}

// repackSplitSavings is the share of a set's price that replacing it with
// more nodes than it had must save.
const repackSplitSavings = 0.1

// repackSwapSavings is the share of a set's price that replacing it with as
// many nodes must save: it moves every pod of the set, for less gain than
// a merge.
const repackSwapSavings = 0.05

// repackSlackMax is the largest set planned with other nodes' room.
const repackSlackMax = 16

type scored struct {
	c    Candidate
	util float64
	pods []*corev1.Pod
}

// repack looks for a set of nodes whose pods, planned afresh, cost less
// than the set: the fragmentation that deletes and one-for-one
// replacements leave behind when every node is partly full and no node's
// pods fit in the others' gaps.
//
// Sets are prefixes of the candidates in two orders (least utilized first,
// and most idle dollars first) within the budgets. Each set is planned
// three ways: onto one new node, which has room for every pod whatever
// kube-scheduler does; onto new nodes alone; and onto new nodes and the
// room other nodes have. The last two must beat kube-scheduler's spreading
// (see kubeModel). A set becomes more nodes than it had only when that
// saves at least 10% of its price: Karpenter never replaces one node with
// several, but a 48xlarge left holding pods that smaller nodes fit for
// less is waste.
func repack(snap scheduling.Snapshot, kube *kubeModel, cands []Candidate, allowed map[string]int, opts Options, totals map[string]*poolTotals) (Command, bool) {
	nodes := map[string]*scheduling.Node{}
	for _, n := range snap.Nodes {
		nodes[n.Name] = n
	}
	var pool []scored
	for _, c := range cands {
		n := nodes[c.Node]
		if n == nil {
			continue
		}
		var moving []*corev1.Pod
		used := resources.Resources{}
		for _, p := range n.Pods {
			if pods.IsOwnedByNode(p) {
				continue
			}
			moving = append(moving, p)
			used = used.Add(resources.PodRequests(p))
		}
		if len(moving) == 0 {
			continue
		}
		pool = append(pool, scored{c: c, util: used.Fraction(resources.FromResourceList(n.Allocatable)), pods: moving})
	}
	// Two orders: the least utilized first, whose pods are the fewest to
	// move; and the most idle dollars first, where the money is.
	orders := []func(a, b scored) bool{
		func(a, b scored) bool { return a.util < b.util },
		func(a, b scored) bool { return a.c.Price*(1-a.util) > b.c.Price*(1-b.util) },
	}
	var best Command
	found := false
	tried := map[string]bool{}
	// Every set is planned over the same pools and the same other nodes,
	// closed to the set's pods when they only count for topology: both are
	// worked out once.
	closed := map[string]*scheduling.Node{}
	shared := scheduling.Snapshot{NodePools: snap.NodePools, DaemonSets: snap.DaemonSets, Nodes: snap.Nodes, Volumes: snap.Volumes, Shared: snap.Shared}
	if kube.interPod {
		for _, n := range snap.Nodes {
			cp := *n
			cp.MarkedForDeletion = true
			closed[n.Name] = &cp
			shared.Nodes = append(shared.Nodes, &cp)
		}
	}
	snap.Shared = scheduling.Share(shared)
	for _, less := range orders {
		sort.SliceStable(pool, func(i, j int) bool {
			if less(pool[i], pool[j]) != less(pool[j], pool[i]) {
				return less(pool[i], pool[j])
			}
			return pool[i].c.Node < pool[j].c.Node
		})
		// The longest prefix the budgets allow.
		left := map[string]int{}
		for k, v := range allowed {
			left[k] = v
		}
		var chosen []scored
		for _, s := range pool {
			if left[s.c.NodePool] <= 0 {
				continue
			}
			left[s.c.NodePool]--
			chosen = append(chosen, s)
		}
		for _, k := range repackSizes {
			if k > len(chosen) {
				break
			}
			var key []string
			for _, s := range chosen[:k] {
				key = append(key, s.c.Node)
			}
			sort.Strings(key)
			if tried[strings.Join(key, ",")] {
				continue
			}
			tried[strings.Join(key, ",")] = true
			if cmd, ok := repackSet(snap, kube, closed, chosen[:k], opts, totals); ok && (!found || cmd.Savings > best.Savings) {
				best, found = cmd, true
			}
		}
	}
	return best, found
}

// repackSet plans the set's pods onto new nodes alone and returns the
// cheapest safe replacement, if it saves money.
func repackSet(snap scheduling.Snapshot, kube *kubeModel, closed map[string]*scheduling.Node, set []scored, opts Options, totals map[string]*poolTotals) (Command, bool) {
	k := len(set)
	var best Command
	found := false
	in := map[string]bool{}
	price := 0.0
	trial := scheduling.Snapshot{NodePools: snap.NodePools, DaemonSets: snap.DaemonSets, Volumes: snap.Volumes, Namespaces: snap.Namespaces, Shared: snap.Shared}
	spot := false
	var setCands []Candidate
	for _, s := range set {
		setCands = append(setCands, s.c)
		in[s.c.Node] = true
		spot = spot || s.c.CapacityType == v1.CapacityTypeSpot
		for _, p := range s.pods {
			trial.Pods = append(trial.Pods, unbound(p))
		}
	}
	// What the set saves going together: under commitments, less than
	// the sum of its members' prices.
	price = opts.saving(setCands)
	// withSlack lets the plan use the room other nodes have; without it
	// the set's pods go to new nodes alone.
	withSlack := trial
	for _, n := range snap.Nodes {
		if !in[n.Name] {
			withSlack.Nodes = append(withSlack.Nodes, n)
			// Without pod (anti-)affinity or topology spread anywhere, the
			// other nodes cannot matter to where the set's pods may go.
			if kube.interPod {
				trial.Nodes = append(trial.Nodes, closed[n.Name])
			}
		}
	}
	// One new node that takes every pod is safe by construction; the other
	// options are checked against kube-scheduler's spreading.
	type option struct {
		repl []*scheduling.NewNodeClaim
		safe bool
	}
	var options []option
	plan, one := scheduling.SolveWithOne(trial, opts.Scheduling)
	if one != nil {
		options = append(options, option{repl: []*scheduling.NewNodeClaim{one}, safe: true})
	}
	if len(plan.Unschedulable) == 0 && len(plan.NewNodeClaims) > 1 {
		options = append(options, option{repl: plan.NewNodeClaims})
	}
	// Using other nodes' room means planning over all of them: worth it
	// for small sets, where room elsewhere matters most.
	if k > repackSlackMax {
	} else if plan := scheduling.Solve(withSlack, opts.Scheduling); len(plan.Unschedulable) == 0 && len(plan.Existing) > 0 {
		options = append(options, option{repl: plan.NewNodeClaims})
	}
	for _, o := range options {
		repl := o.repl
		savings := price - scheduling.TotalPrice(repl)
		if savings <= 1e-9 || (found && savings <= best.Savings) {
			continue
		}
		// As many nodes as before, or more, must be clearly worth moving
		// every pod of the set for.
		if len(repl) > k && savings < repackSplitSavings*price || len(repl) == k && savings < repackSwapSavings*price {
			continue
		}
		if spot && anySpot(repl) {
			if !opts.SpotToSpot {
				continue
			}
			// Spot nodes become spot nodes only with enough cheaper types,
			// each cheaper than its share of the set's price: the whole
			// price for each would let the replacements together cost more
			// than the set.
			share := savings / float64(len(repl))
			narrowed := make([]*scheduling.NewNodeClaim, len(repl))
			for i, nc := range repl {
				narrowed[i] = nc
				if nc.Offering.CapacityType != v1.CapacityTypeSpot {
					continue
				}
				if narrowed[i], _ = spotToSpot(nc.Price()+share, nc, poolTypes(snap, nc.NodePool)); narrowed[i] == nil {
					break
				}
			}
			if slices.Contains(narrowed, nil) {
				continue
			}
			repl = narrowed
		}
		repl, why := cheaperOnly(pinSpot(repl), price)
		if why != "" {
			continue
		}
		savings = price - scheduling.TotalPrice(repl)
		risk := 0.0
		if !o.safe {
			var ok bool
			if risk, ok = worthIt(kube, opts, setCands, repl, savings); !ok {
				continue
			}
		}
		cmd := Command{Reason: v1.DisruptionReasonUnderutilized, Candidates: setCands, Replacements: repl, Savings: savings, Risk: risk}
		if balanced(snap, totals, opts.Policy, cmd) != "" {
			continue
		}
		best, found = cmd, true
	}
	return best, found
}

func anySpot(ncs []*scheduling.NewNodeClaim) bool {
	for _, nc := range ncs {
		if nc.Offering.CapacityType == v1.CapacityTypeSpot {
			return true
		}
	}
	return false
}

func poolTypes(snap scheduling.Snapshot, name string) []*cloudprovider.InstanceType {
	for _, p := range snap.NodePools {
		if p.NodePool.Name == name {
			return p.InstanceTypes
		}
	}
	return nil
}

// unbound is p as a plan sees a pod that is to move: bound to no node. A
// plan never writes a pod, so a shallow copy serves; a deep copy of every
// moving pod was 10 MB of the controller's heap in the scale run's churn.
func unbound(p *corev1.Pod) *corev1.Pod {
	cp := *p
	cp.Spec.NodeName = ""
	return &cp
}
