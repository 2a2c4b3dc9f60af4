package simulate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
)

// A run with Config.Commitments prices its nodes as the bill does, as the
// controller does when the AWS provider reads the account's Reserved
// Instances and Savings Plans: plans fill the commitments' room first
// (scheduling.WithCommitments), consolidation weighs what removing nodes
// saves on the bill (Options.Saving), spend caps count what nodes cost
// there, and the run's cost is the bill's. Without commitments, every
// price is the list price, and none of this changes a run.

// fleet is the nodes running now (launched and not yet terminated), as the
// bill sees them, by node name.
func (s *sim) fleet() []commitment.Instance {
	var out []commitment.Instance
	for _, n := range s.liveNodes() {
		out = append(out, commitment.Instance{ID: n.name, Type: n.it.Name, Zone: n.offering.Zone, CapacityType: n.offering.CapacityType, ListPrice: n.offering.Price})
	}
	return out
}

// coverage is the commitments applied to the running nodes; the zero
// Coverage without commitments.
func (s *sim) coverage() commitment.Coverage {
	if s.cfg.Commitments == nil {
		return commitment.Coverage{}
	}
	return commitment.Apply(*s.cfg.Commitments, s.fleet())
}

// effectivePrice is what n costs an hour on the bill: its list price less
// what the commitments cover (cov, from coverage).
func effectivePrice(n *simNode, cov commitment.Coverage) float64 {
	if e, ok := cov.Effective[n.name]; ok {
		return e
	}
	return n.offering.Price
}

// billChanged is called after the running nodes change: under
// commitments, the cost so far is charged at the rate that held since the
// last change, and the rate is worked out again, since which nodes the
// commitments cover (and so every node's effective price) can change with
// any launch or termination.
func (s *sim) billChanged() {
	if s.cfg.Commitments == nil {
		return
	}
	s.rec.cost += s.rec.billRate * s.now.Sub(s.rec.billSince).Hours()
	s.rec.billSince = s.now
	s.rec.billRate = s.coverage().Total()
}

// withCommitments is snap with the commitments' room left after the
// running nodes (WithCommitments) and, for the pools with a spend cap,
// what their nodes cost on the bill counted against it, as the
// controller's state snapshot counts them. The key it returns says what
// of it can change from one snapshot to the next.
func (s *sim) withCommitments(snap scheduling.Snapshot) (scheduling.Snapshot, string) {
	cov := s.coverage()
	var key strings.Builder
	var live []*simNode
	for i, p := range snap.NodePools {
		if _, ok, _ := spendcap.Of(p.NodePool); !ok {
			continue
		}
		if live == nil {
			live = s.liveNodes()
		}
		spent := int64(0)
		for _, n := range live {
			if n.pool == p.NodePool.Name {
				spent += spendcap.Micro(effectivePrice(n, cov))
			}
		}
		use := resources.FromResourceList(p.InUse).With(spendcap.Resource, spent)
		rl := use.ResourceList()
		rl["nodes"] = p.InUse["nodes"]
		snap.NodePools[i].InUse = rl
		fmt.Fprintf(&key, "%s spends %d;", p.NodePool.Name, spent)
	}
	if s.cfg.Commitments == nil {
		return snap, key.String()
	}
	ids := make([]string, 0, len(cov.Left))
	for id := range cov.Left {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(&key, "%s left %g;", id, cov.Left[id])
	}
	out := scheduling.WithCommitments(*s.cfg.Commitments, snap)
	// Static pools fill the commitments' room too, as the AWS provider
	// gives every pool's types the rooms.
	if len(snap.Static) > 0 {
		out.Static = scheduling.WithCommitments(*s.cfg.Commitments, scheduling.Snapshot{NodePools: snap.Static, Nodes: snap.Nodes}).NodePools
	}
	return out, key.String()
}

// saving is what removing nodes together saves on the bill, with the
// nodes already leaving counted as gone, as the controller's
// consolidation weighs it; nil without commitments (list prices).
func (s *sim) saving() func(names []string) float64 {
	if s.cfg.Commitments == nil {
		return nil
	}
	savings := commitment.Savings(*s.cfg.Commitments, s.fleet())
	leaving := map[string]bool{}
	for _, n := range s.liveNodes() {
		if n.deleting || n.underway != nil {
			leaving[n.name] = true
		}
	}
	gone := savings(leaving)
	return func(names []string) float64 {
		removed := map[string]bool{}
		for k := range leaving {
			removed[k] = true
		}
		for _, name := range names {
			removed[name] = true
		}
		return savings(removed) - gone
	}
}

// commitmentsCanSave is the most the commitments can take off the list
// price of any fleet the pools can launch, $/h: every RI unit covering the
// type it saves most on per unit, and every Savings Plan dollar spent at
// the deepest discount it offers. The LP bound at list prices, less this,
// is a lower bound on the bill: a loose one, as no fleet gets every
// commitment's best at once.
func commitmentsCanSave(cm commitment.Commitments, pools map[string][]*cloudprovider.InstanceType) float64 {
	var its []*cloudprovider.InstanceType
	for _, name := range sortedKeys(pools) {
		its = append(its, pools[name]...)
	}
	total := 0.0
	for _, ri := range cm.ReservedInstances {
		best := 0.0
		for _, it := range its {
			for _, o := range it.Offerings {
				if o.CapacityType == v1.CapacityTypeSpot || o.Limited() {
					continue
				}
				if takes := commitment.Takes(ri, it.Name, o.Zone); takes > 0 {
					best = max(best, o.Price/takes)
				}
			}
		}
		total += ri.Units() * best
	}
	for _, p := range cm.SavingsPlans {
		best := 0.0
		for _, it := range its {
			rate, ok := p.Rates[it.Name]
			if !ok || rate <= 0 {
				continue
			}
			for _, o := range it.Offerings {
				if o.CapacityType != v1.CapacityTypeSpot && !o.Limited() && o.Price > rate {
					best = max(best, o.Price/rate-1)
				}
			}
		}
		total += p.Commitment * best
	}
	return total
}

// noteCanSave keeps, in canSave, the most the commitments can save over
// every set of types the pools have had: a NodeOverlay's price, or a
// NodePool applied mid-run, may change them, and the bound of every
// sample must stay below the bill.
func (s *sim) noteCanSave() {
	if s.cfg.Commitments != nil {
		s.canSave = max(s.canSave, commitmentsCanSave(*s.cfg.Commitments, s.poolTypes))
	}
}

// boundOnBill is the list-price bound less what the commitments can save,
// and never below nothing.
func boundOnBill(list, canSave float64) float64 {
	return math.Max(list-canSave, 0)
}
