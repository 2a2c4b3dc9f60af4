package disruption

import (
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

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

// repackWorkers caps the sets planned at once: each plan holds its own
// working-out, which the controller's memory limit counts.
const repackWorkers = 4

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
// onto new nodes and the room other nodes have; and, where that plan
// cannot serve (see repackSet), onto one new node, which has room for
// every pod whatever kube-scheduler does, and onto new nodes alone. Plans
// but the one node must beat kube-scheduler's spreading (see kubeModel).
// A set becomes more nodes than it had only when that saves at least 10%
// of its price: Karpenter never replaces one node with several, but a
// 48xlarge left holding pods that smaller nodes fit for less is waste.
//
// A set is not planned when a bound shows it cannot beat the best set
// planned so far (bestSet): the choice is the same, for a fraction of the
// planning.
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
	var sets [][]scored
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
			sets = append(sets, slices.Clone(chosen[:k]))
		}
	}
	return bestSet(snap, kube, closed, sets, opts, totals)
}

// bestSet is the set that saves most, the first of them on a tie. Sets are
// planned in the order of what they could save at most (setBound), and
// once that is less than the best saving found, the rest are not planned:
// the choice is the one planning every set makes.
func bestSet(snap scheduling.Snapshot, kube *kubeModel, closed map[string]*scheduling.Node, sets [][]scored, opts Options, totals map[string]*poolTotals) (Command, bool) {
	bound := newSetBound(snap)
	type trial struct {
		i                    int
		set                  []scored
		price, upper, withUp float64
	}
	trials := make([]trial, len(sets))
	for i, set := range sets {
		in := map[string]bool{}
		var cands []Candidate
		for _, s := range set {
			in[s.c.Node] = true
			cands = append(cands, s.c)
		}
		price := opts.saving(cands)
		d := setDemand(set)
		t := trial{i: i, set: set, price: price, upper: price - bound.cost(d)}
		t.withUp = t.upper
		if len(set) <= repackSlackMax {
			t.withUp = price - bound.cost(d.Sub(bound.room(in)))
		}
		// A spot set may become spot nodes of types spotToSpot picks
		// outside the plan's, which the bound does not price.
		if !pruneRepack || opts.SpotToSpot && anySpotCandidate(cands) {
			t.upper, t.withUp = math.Inf(1), math.Inf(1)
		}
		trials[i] = t
	}
	sort.SliceStable(trials, func(a, b int) bool {
		return max(trials[a].upper, trials[a].withUp) > max(trials[b].upper, trials[b].withUp)
	})
	// Sets are planned on every core, each against the best saving found
	// when it starts: a set pruned against a lower floor than the serial
	// order would give is still one that cannot win, so the choice does
	// not depend on which finishes first.
	var mu sync.Mutex
	var best Command
	bestAt, next := -1, 0
	work := func() {
		for {
			mu.Lock()
			if next == len(trials) {
				mu.Unlock()
				return
			}
			t := trials[next]
			next++
			floor := 1e-9
			if bestAt >= 0 {
				floor = best.Savings
			}
			if max(t.upper, t.withUp) < floor {
				// The rest could save less still.
				next = len(trials)
				mu.Unlock()
				return
			}
			mu.Unlock()
			cmd, ok := repackSet(snap, kube, closed, t.set, opts, totals, setLimits{price: t.price, floor: floor, upper: t.upper, withUp: t.withUp})
			mu.Lock()
			if ok && (bestAt < 0 || cmd.Savings > best.Savings || cmd.Savings == best.Savings && t.i < bestAt) {
				best, bestAt = cmd, t.i
			}
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), repackWorkers, len(trials)) {
		wg.Go(work)
	}
	wg.Wait()
	return best, bestAt >= 0
}

// setLimits are what a set saves going (price: under commitments, less
// than the sum of its members' prices), what it could save at most planned
// onto new nodes alone (upper) and with other nodes' room (withUp), and
// the saving it must reach to matter (floor): plans that cannot reach it
// are skipped.
type setLimits struct {
	price, floor, upper, withUp float64
}

func anySpotCandidate(cands []Candidate) bool {
	for _, c := range cands {
		if c.CapacityType == v1.CapacityTypeSpot {
			return true
		}
	}
	return false
}

// repackSet plans the set's pods, for small sets, with the room other
// nodes have and, where that cannot serve, onto one new node and onto new
// nodes alone, and returns the cheapest safe replacement, if it saves
// money. Plans lim shows cannot matter are skipped.
func repackSet(snap scheduling.Snapshot, kube *kubeModel, closed map[string]*scheduling.Node, set []scored, opts Options, totals map[string]*poolTotals, lim setLimits) (Command, bool) {
	k := len(set)
	var best Command
	found := false
	in := map[string]bool{}
	price := lim.price
	trial := scheduling.Snapshot{NodePools: snap.NodePools, DaemonSets: snap.DaemonSets, Volumes: snap.Volumes, Namespaces: snap.Namespaces, Shared: snap.Shared}
	var setCands []Candidate
	for _, s := range set {
		setCands = append(setCands, s.c)
		in[s.c.Node] = true
		for _, p := range s.pods {
			trial.Pods = append(trial.Pods, unbound(p))
		}
	}
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
	spot := anySpotCandidate(setCands)
	eval := func(o repackOption) (Command, bool, bool) {
		return repackOptionCommand(snap, kube, o, setCands, price, spot, opts, totals)
	}
	// Using other nodes' room means planning over all of them: worth it
	// for small sets, where room elsewhere matters most. It is planned
	// first, as it is where most savings are, but weighed last.
	var slack *repackOption
	var slackCmd Command
	slackOK, slackSmall := false, false
	if k <= repackSlackMax && lim.withUp >= lim.floor {
		repackPlans.Add(1)
		if plan := scheduling.Solve(withSlack, opts.Scheduling); len(plan.Unschedulable) == 0 && len(plan.Existing) > 0 {
			slack = &repackOption{repl: plan.NewNodeClaims}
			slackCmd, slackOK, slackSmall = eval(*slack)
		}
	}
	// The new nodes alone are planned only where the room elsewhere could
	// not be used: it was not planned (the set is large), its plan did not
	// use it, or its command was refused for a reason the new nodes alone
	// may not share (kube-scheduler's spreading, spot, balance). The room
	// elsewhere widens the plan's choice, so where its command was taken,
	// or refused for saving too little, the new nodes alone would save no
	// more, but for the planner's rounding. In the simulator's benchmark
	// stretches of the README's day they were half of the planning, and
	// leaving them out changed no decision.
	roomDecided := slack != nil && (slackOK || slackSmall)
	// Nor can they matter when they cannot reach the floor.
	hopeless := lim.upper < lim.floor
	var options []repackOption
	if !roomDecided && !hopeless {
		repackPlans.Add(1)
		plan, one := scheduling.SolveWithOne(trial, opts.Scheduling)
		if one != nil {
			options = append(options, repackOption{repl: []*scheduling.NewNodeClaim{one}, safe: true})
		}
		if len(plan.Unschedulable) == 0 && len(plan.NewNodeClaims) > 1 {
			options = append(options, repackOption{repl: plan.NewNodeClaims})
		}
	}
	if slack != nil {
		options = append(options, *slack)
	}
	for i, o := range options {
		savings := price - scheduling.TotalPrice(o.repl)
		if savings <= 1e-9 || (found && savings <= best.Savings) {
			continue
		}
		cmd, ok := slackCmd, slackOK
		if slack == nil || i < len(options)-1 {
			cmd, ok, _ = eval(o)
		}
		if ok {
			best, found = cmd, true
		}
	}
	return best, found
}

// repackOption is one way to place a set's pods: the new nodes it
// launches, and whether they hold the pods however kube-scheduler places
// them.
type repackOption struct {
	repl []*scheduling.NewNodeClaim
	safe bool
}

// repackOptionCommand is the command option o makes of the set, if it
// saves enough, is safe enough and keeps the pools balanced. small
// reports a refusal for saving too little: nothing, or less than moving
// every pod of the set to as many nodes or more is worth.
func repackOptionCommand(snap scheduling.Snapshot, kube *kubeModel, o repackOption, setCands []Candidate, price float64, spot bool, opts Options, totals map[string]*poolTotals) (cmd Command, ok, small bool) {
	k := len(setCands)
	repl := o.repl
	savings := price - scheduling.TotalPrice(repl)
	if savings <= 1e-9 {
		return Command{}, false, true
	}
	// As many nodes as before, or more, must be clearly worth moving
	// every pod of the set for.
	if len(repl) > k && savings < repackSplitSavings*price || len(repl) == k && savings < repackSwapSavings*price {
		return Command{}, false, true
	}
	if spot && anySpot(repl) {
		if !opts.SpotToSpot {
			return Command{}, false, false
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
			return Command{}, false, false
		}
		repl = narrowed
	}
	repl, why := cheaperOnly(pinSpot(repl), price)
	if why != "" {
		return Command{}, false, false
	}
	savings = price - scheduling.TotalPrice(repl)
	risk := 0.0
	if !o.safe {
		var worth bool
		if risk, worth = worthIt(kube, opts, setCands, repl, savings); !worth {
			return Command{}, false, false
		}
	}
	cmd = Command{Reason: v1.DisruptionReasonUnderutilized, Candidates: setCands, Replacements: repl, Savings: savings, Risk: risk}
	if balanced(snap, totals, opts.Policy, cmd) != "" {
		return Command{}, false, false
	}
	return cmd, true, false
}

func anySpot(ncs []*scheduling.NewNodeClaim) bool {
	for _, nc := range ncs {
		if nc.Offering.CapacityType == v1.CapacityTypeSpot {
			return true
		}
	}
	return false
}

// poolTypes are the types spotToSpot may pick for pool name.
func poolTypes(snap scheduling.Snapshot, name string) []*cloudprovider.InstanceType {
	for _, p := range snap.NodePools {
		if p.NodePool.Name == name {
			return admitted(p)
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
