package disruption

import (
	"fmt"
	"sort"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// Candidate is a node that voluntary disruption might remove.
type Candidate struct {
	Node         string
	NodeClaim    string
	NodePool     string
	InstanceType string
	CapacityType string
	Zone         string
	// Price the node costs now, $/h.
	Price float64
	// Blocked says why the node may not be disrupted voluntarily (a pod with
	// do-not-disrupt, a PDB, nominated for pending pods); empty when it may.
	Blocked string
	// Forceable: only the node's pods block it (do-not-disrupt, PDBs) and
	// its NodeClaim has a terminationGracePeriod. Drift replaces such a
	// node anyway, as Karpenter does: the drain honours the pods' wishes
	// until the period is up, which bounds how long they can hold it.
	Forceable bool
	// DriftedSince is when the NodeClaim became Drifted; zero when it is not.
	DriftedSince time.Time
	// Consolidatable: the node has been quiet for its pool's
	// consolidateAfter. Decide consolidates only these; Consolidate takes
	// every candidate it is given.
	Consolidatable bool
}

// Options shape a consolidation decision.
type Options struct {
	// Allowed is how many more nodes each NodePool may disrupt now for
	// underutilization: its budget less the nodes already disrupting.
	// Missing pools allow none.
	Allowed map[string]int
	// AllowedEmpty is the same for empty nodes, whose budgets may differ by
	// reason; nil means Allowed.
	AllowedEmpty map[string]int
	// AllowedDrift is the same for drifted nodes (Decide only).
	AllowedDrift map[string]int
	// BudgetNotes name, by reason and NodePool, the budget that binds
	// (see Binding), for the reason a node its budget keeps is given.
	// SetBudgets fills them with the Allowed maps.
	BudgetNotes map[v1.DisruptionReason]map[string]string
	// Policy is each NodePool's consolidationPolicy.
	Policy map[string]v1.ConsolidationPolicy
	// SpotToSpot allows replacing a spot node with a cheaper spot node.
	SpotToSpot bool
	// Cautious allows only commands whose pods find room however
	// kube-scheduler spreads them: set after a command left pods pending.
	Cautious bool
	// Scheduling are the operator's scheduling settings, for every plan.
	Scheduling scheduling.Options
	// Saving, when the account's commitments shape the bill, is what it
	// saves per hour when the named NodeClaims go together; nil sums
	// their Prices. A node the RIs cover saves nothing once the others
	// they would cover have gone (cloudprovider.Bill).
	Saving func(nodeClaims []string) float64
}

// saving is what removing the candidates together saves per hour.
func (o Options) saving(cands []Candidate) float64 {
	if o.Saving == nil {
		total := 0.0
		for _, c := range cands {
			total += c.Price
		}
		return total
	}
	names := make([]string, len(cands))
	for i, c := range cands {
		names[i] = c.NodeClaim
	}
	return o.Saving(names)
}

// SavesNothingReason is why a node is kept whose removal, with the others
// chosen, would not lower the bill.
const SavesNothingReason = "removing it saves nothing: the account's Reserved Instances or Savings Plans pay for it whether it runs or not"

// Command is one disruption to carry out.
type Command struct {
	Reason     v1.DisruptionReason
	Candidates []Candidate
	// Replacements are launched, and must be initialized, before the
	// candidates go.
	Replacements []*scheduling.NewNodeClaim
	// Savings in $/h.
	Savings float64
	// Risk is what new capacity would cost, $/h, for the pods
	// kube-scheduler might leave without room; zero when none.
	Risk float64
	// Static replaces nodes of a static NodePool one for one: the pool's
	// count is what is kept, not a plan for its pods, so the pods' fit is
	// not checked again before the drain.
	Static bool
}

// Decision is what consolidation will do and, for every other candidate, why not.
type Decision struct {
	Commands []Command
	Skipped  map[string]string
}

// Consolidate evaluates every candidate, not a sample: each one's removal is
// tried on a shared model of the cluster. Empty nodes go first, all at once;
// then nodes whose pods fit elsewhere are removed together, greedily by
// price, each checked against the removals before it; then nodes that a
// strictly cheaper single node can replace. Budgets cap each NodePool.
//
// snap.Pods are the pending pods: they keep their claim on the room they
// will take (see scheduling.NewCluster), and no removal counts on capacity
// that is still launching or not initialized.
func Consolidate(snap scheduling.Snapshot, cands []Candidate, opts Options) Decision {
	d := Decision{Skipped: map[string]string{}}
	cluster := scheduling.NewCluster(snap, opts.Scheduling)
	snap = asClaimed(snap, cluster.Claims())
	kube := newKubeModel(snap)
	kube.sched = opts.Scheduling
	totals := totalsByPool(snap, cands)
	types := map[string][]*cloudprovider.InstanceType{}
	for _, p := range snap.NodePools {
		types[p.NodePool.Name] = admitted(p)
	}
	allowed := map[string]int{}
	for k, v := range opts.Allowed {
		allowed[k] = v
	}
	allowedEmpty := allowed
	if opts.AllowedEmpty != nil {
		allowedEmpty = map[string]int{}
		for k, v := range opts.AllowedEmpty {
			allowedEmpty[k] = v
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].Node < cands[j].Node })

	type eval struct {
		c       Candidate
		removal scheduling.Removal
	}
	var empty, deletable, replaceable []eval
	// movable nodes have pods that could all run elsewhere: what repack
	// may combine.
	var movable []Candidate
	for _, c := range cands {
		if c.Blocked != "" {
			d.Skipped[c.Node] = c.Blocked
			continue
		}
		if why := unpriced(c); why != "" {
			d.Skipped[c.Node] = why
			continue
		}
		r, err := cluster.TryRemove(c.Node)
		if err != nil {
			d.Skipped[c.Node] = err.Error()
			continue
		}
		policy := opts.Policy[c.NodePool]
		switch {
		case r.Moved == 0:
			empty = append(empty, eval{c, r})
			continue
		case policy == v1.ConsolidationPolicyWhenEmpty:
			d.Skipped[c.Node] = "consolidationPolicy is WhenEmpty and the node has pods"
			continue
		case len(r.Unschedulable) > 0:
			d.Skipped[c.Node] = fmt.Sprintf("its pods would not fit elsewhere: pod %s/%s: %s", r.Unschedulable[0].Pod.Namespace, r.Unschedulable[0].Pod.Name, r.Unschedulable[0].Reason)
			waitingForLaunch(cluster, c, d.Skipped)
			continue
		}
		movable = append(movable, c)
		switch {
		case len(r.Replacements) == 0:
			deletable = append(deletable, eval{c, r})
		case len(r.Replacements) > 1:
			d.Skipped[c.Node] = fmt.Sprintf("its pods would need %d new nodes; consolidation replaces one node with at most one", len(r.Replacements))
			waitingForLaunch(cluster, c, d.Skipped)
		default:
			repl := r.Replacements[0]
			bothSpot := c.CapacityType == v1.CapacityTypeSpot && repl.Offering.CapacityType == v1.CapacityTypeSpot
			spotWhy := ""
			if bothSpot && opts.SpotToSpot {
				spotWhy = spotToSpotWhy(c.Price, repl, types[c.NodePool])
			}
			priceWhy := ""
			if repl.Price() < c.Price-1e-9 {
				_, priceWhy = cheaperOnly(pinSpot([]*scheduling.NewNodeClaim{repl}), c.Price)
			}
			switch {
			case repl.Price() >= c.Price-1e-9:
				d.Skipped[c.Node] = fmt.Sprintf("no cheaper replacement: its pods need a %s at $%.4f/h, the node costs $%.4f/h", repl.InstanceType.Name, repl.Price(), c.Price)
				waitingForLaunch(cluster, c, d.Skipped)
			case bothSpot && !opts.SpotToSpot:
				d.Skipped[c.Node] = "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
			case spotWhy != "":
				d.Skipped[c.Node] = spotWhy
			case priceWhy != "":
				d.Skipped[c.Node] = priceWhy
			case waitsForInFlight(cluster, c.Node, r):
				// Nor may repack count it: its pods would go there.
				d.Skipped[c.Node] = WaitingForLaunchReason
				movable = movable[:len(movable)-1]
			default:
				replaceable = append(replaceable, eval{c, r})
			}
		}
	}

	takeFrom := func(budget map[string]int, reason v1.DisruptionReason, c Candidate) bool {
		if budget[c.NodePool] <= 0 {
			d.Skipped[c.Node] = opts.budgetReason(c.NodePool, reason)
			return false
		}
		budget[c.NodePool]--
		return true
	}
	take := func(c Candidate) bool { return takeFrom(allowed, v1.DisruptionReasonUnderutilized, c) }

	if len(empty) > 0 {
		cmd := Command{Reason: v1.DisruptionReasonEmpty}
		if opts.Saving != nil {
			// The dearest first: under commitments, the last few empty
			// nodes may save nothing, and the cheap ones should stay.
			sort.SliceStable(empty, func(i, j int) bool { return empty[i].c.Price > empty[j].c.Price })
		}
		for _, e := range empty {
			if opts.Saving != nil && opts.saving(append(cmd.Candidates, e.c)) <= cmd.Savings+1e-9 {
				d.Skipped[e.c.Node] = SavesNothingReason
				continue
			}
			if !takeFrom(allowedEmpty, v1.DisruptionReasonEmpty, e.c) {
				continue
			}
			if _, err := cluster.Remove(e.c.Node); err == nil {
				cmd.Candidates = append(cmd.Candidates, e.c)
				cmd.Savings = opts.saving(cmd.Candidates)
			}
		}
		if len(cmd.Candidates) > 0 {
			d.Commands = append(d.Commands, cmd)
		}
	}

	// Delete the most expensive first: each removal uses up room the
	// later ones might have used.
	sort.SliceStable(deletable, func(i, j int) bool { return deletable[i].c.Price > deletable[j].c.Price })
	del := Command{Reason: v1.DisruptionReasonUnderutilized}
	for _, e := range deletable {
		r, err := cluster.TryRemove(e.c.Node)
		if err != nil || len(r.Unschedulable) > 0 || len(r.Replacements) > 0 {
			d.Skipped[e.c.Node] = "its pods fit elsewhere only before other nodes chosen for removal"
			continue
		}
		if opts.Saving != nil && opts.saving(append(del.Candidates, e.c)) <= del.Savings+1e-9 {
			d.Skipped[e.c.Node] = SavesNothingReason
			continue
		}
		if !take(e.c) {
			continue
		}
		if _, err := cluster.Remove(e.c.Node); err != nil {
			continue
		}
		del.Candidates = append(del.Candidates, e.c)
		del.Savings = opts.saving(del.Candidates)
	}
	if len(del.Candidates) > 0 {
		// The longest prefix whose pods kube-scheduler cannot strand.
		n := sort.Search(len(del.Candidates), func(i int) bool {
			_, ok := worthIt(kube, opts, del.Candidates[:i+1], nil, opts.saving(del.Candidates[:i+1]))
			return !ok
		})
		for _, c := range del.Candidates[n:] {
			d.Skipped[c.Node] = unsafeReason
		}
		del.Candidates = del.Candidates[:n]
		del.Savings = opts.saving(del.Candidates)
		del.Risk = kube.risk(del.Candidates, nil)
	}
	if why := balanced(snap, totals, opts.Policy, del); why != "" && len(del.Candidates) > 0 {
		for _, c := range del.Candidates {
			d.Skipped[c.Node] = why
		}
		del.Candidates = nil
	}
	if len(del.Candidates) > 0 {
		d.Commands = append(d.Commands, del)
	}

	sort.SliceStable(replaceable, func(i, j int) bool {
		return replaceable[i].c.Price-replaceable[i].removal.Replacements[0].Price() > replaceable[j].c.Price-replaceable[j].removal.Replacements[0].Price()
	})
	for _, e := range replaceable {
		r, err := cluster.TryRemove(e.c.Node)
		if err != nil || len(r.Unschedulable) > 0 || len(r.Replacements) > 1 {
			d.Skipped[e.c.Node] = "its pods no longer fit a single replacement after other removals"
			continue
		}
		if len(r.Replacements) == 1 && r.Replacements[0].Price() >= e.c.Price-1e-9 {
			d.Skipped[e.c.Node] = "no cheaper replacement after other removals"
			continue
		}
		savings := e.c.Price - scheduling.TotalPrice(r.Replacements)
		risk, ok := worthIt(kube, opts, []Candidate{e.c}, r.Replacements, savings)
		if !ok {
			d.Skipped[e.c.Node] = unsafeReason
			continue
		}
		if why := balanced(snap, totals, opts.Policy, Command{Candidates: []Candidate{e.c}, Savings: savings}); why != "" {
			d.Skipped[e.c.Node] = why
			continue
		}
		// The replacement is settled before the removal enters the model: a
		// plan dropped after it (no cheaper offering once narrowed) would
		// leave its replacement in the model, a node that later removals
		// of this round could count on and no command launches.
		cmd := Command{Reason: v1.DisruptionReasonUnderutilized, Candidates: []Candidate{e.c}, Savings: e.c.Price, Risk: risk}
		if len(r.Replacements) == 1 {
			repl := r.Replacements[0]
			if e.c.CapacityType == v1.CapacityTypeSpot && repl.Offering.CapacityType == v1.CapacityTypeSpot {
				if narrowed, _ := spotToSpot(e.c.Price, repl, types[e.c.NodePool]); narrowed != nil {
					repl = narrowed
				}
			}
			narrowed, why := cheaperOnly(pinSpot([]*scheduling.NewNodeClaim{repl}), e.c.Price)
			if why != "" {
				d.Skipped[e.c.Node] = why
				continue
			}
			cmd.Replacements = narrowed
			cmd.Savings -= narrowed[0].Price()
		}
		if !take(e.c) {
			continue
		}
		if _, err := cluster.Remove(e.c.Node); err != nil {
			continue
		}
		d.Commands = append(d.Commands, cmd)
	}
	if len(d.Commands) == 0 {
		if cmd, ok := repack(snap, kube, movable, opts.Allowed, opts, totals); ok {
			for _, c := range cmd.Candidates {
				delete(d.Skipped, c.Node)
			}
			d.Commands = append(d.Commands, cmd)
		}
	}
	return d
}

// WaitingForLaunchReason is why a node stays whose pods would fit only in
// capacity that is still launching or not yet initialized: that machine is
// not Ready, may never be, and its room was launched for other pods.
const WaitingForLaunchReason = "its pods would fit elsewhere only on capacity that is still launching or not yet initialized"

// waitingForLaunch replaces a candidate's skip reason with
// WaitingForLaunchReason when capacity still launching is what its removal
// lacks, so that "why not?" names the real cause.
func waitingForLaunch(cluster *scheduling.Cluster, c Candidate, skipped map[string]string) {
	if !cluster.HasInFlight() {
		return
	}
	if r, err := cluster.TryRemoveCountingInFlight(c.Node); err == nil && len(r.Unschedulable) == 0 && len(r.Replacements) == 0 {
		skipped[c.Node] = WaitingForLaunchReason
	}
}

// asClaimed is snap as kube-scheduler will find it: each pending pod on the
// node the model holds room for it on, and capacity that is still launching
// closed, so that the risk model and repacking see the same cluster as the
// removals.
func asClaimed(snap scheduling.Snapshot, claims map[string][]*corev1.Pod) scheduling.Snapshot {
	out := snap
	out.Pods = nil
	out.Nodes = make([]*scheduling.Node, len(snap.Nodes))
	for i, n := range snap.Nodes {
		if len(claims[n.Name]) == 0 && !n.InFlight {
			out.Nodes[i] = n
			continue
		}
		cp := *n
		cp.Pods = append(append([]*corev1.Pod{}, n.Pods...), claims[n.Name]...)
		cp.MarkedForDeletion = cp.MarkedForDeletion || n.InFlight
		out.Nodes[i] = &cp
	}
	return out
}

const unsafeReason = "kube-scheduler could spread its pods so that some find no node with room, and new capacity for them would cost more than the savings"

// worthIt returns a command's risk and whether it saves money even after
// kube-scheduler's worst spreading; when cautious, only riskless commands
// are worth it.
func worthIt(kube *kubeModel, opts Options, cands []Candidate, repl []*scheduling.NewNodeClaim, savings float64) (float64, bool) {
	risk := kube.risk(cands, repl)
	if risk > 0 && opts.Cautious {
		return risk, false
	}
	return risk, savings-risk > 1e-9
}

func spotToSpotWhy(price float64, repl *scheduling.NewNodeClaim, types []*cloudprovider.InstanceType) string {
	_, why := spotToSpot(price, repl, types)
	return why
}
