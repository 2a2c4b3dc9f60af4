package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	"github.com/joiner-autoscaler/joiner/pkg/lpbound"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// gradeCommitted grades a workload's plan under its commitment mix
// (commitmentMix) against the best integer plan on the same bill. The
// plan is Joiner's with the commitments (scheduling.WithCommitments),
// priced by scheduling.Bill. The integer program chooses both the nodes
// and which of them the commitments cover, as freely as the bill
// allows (commitmentTerms), so it is at least as good as any order in
// which AWS applies them. Its patterns come from two configuration LPs,
// one at list prices and one at the commitments' prices (an RI's types at
// nothing, a plan's at its rate), with the plan's own nodes and those of
// the plan at list prices as seeds: it can always match the plan, and
// CBC starts from it. Pricing settles for the best pattern its own search
// finds (no CBC knapsack, which took three minutes a mix for two LPs):
// these are grades against the best plan of many good patterns, with
// CBC's bound over them, not against a certified optimum.
func gradeCommitted(w workload, its []*cloudprovider.InstanceType, dir string, sec int) (result, error) {
	var g result
	snap, err := snapshotOf(w, its, dir)
	if err != nil {
		return g, err
	}
	g.pods = len(snap.Pods)
	listed := scheduling.Solve(snap, scheduling.Options{})
	cm := commitmentMix(listed, its)
	committedSnap := scheduling.WithCommitments(cm, snap)
	start := time.Now()
	plan := scheduling.Solve(committedSnap, scheduling.Options{})
	g.planTime = time.Since(start)
	if len(plan.Unschedulable) > 0 {
		return g, fmt.Errorf("%d pods unschedulable: %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
	g.plan, g.nodes = total(scheduling.Bill(cm, committedSnap, plan)), len(plan.NewNodeClaims)
	start = time.Now()
	m := scheduling.PackingModel(snap)
	seed := append(planPatterns(m, plan), planPatterns(m, listed)...)
	res, err := lpbound.Patterns(m.Kinds, m.Shapes, m.Limits, lpbound.PatternOptions{Seed: seed})
	if err != nil {
		return g, err
	}
	mc := scheduling.PackingModel(committedSnap)
	resc, err := lpbound.Patterns(mc.Kinds, mc.Shapes, mc.Limits, lpbound.PatternOptions{})
	if err != nil {
		return g, err
	}
	res.Patterns = append(res.Patterns, translate(mc, m, resc.Patterns)...)
	terms, err := commitmentTerms(m, res.Patterns, cm, snap)
	if err != nil {
		return g, err
	}
	terms.start = startOf(planPatterns(m, plan), res.Patterns)
	g.integer, g.bound, g.status, err = solveMIP(filepath.Join(dir, w.name), m, res, sec, terms)
	g.baseTime = time.Since(start)
	return g, err
}

// translate maps patterns of one model onto another of the same snapshot
// (its kinds priced otherwise) by kind and shape name; patterns of a kind
// or shape the other lacks are dropped.
func translate(from, to scheduling.Packing, ps []lpbound.Pattern) []lpbound.Pattern {
	kinds, shapes := map[string]int{}, map[string]int{}
	for i, k := range to.Kinds {
		kinds[k.Name] = i
	}
	for i, s := range to.Shapes {
		shapes[s.Name] = i
	}
	var out []lpbound.Pattern
next:
	for _, p := range ps {
		k, ok := kinds[from.Kinds[p.Kind].Name]
		if !ok {
			continue
		}
		counts := make([]int, len(to.Shapes))
		for s, c := range p.Counts {
			if c == 0 {
				continue
			}
			t, ok := shapes[from.Shapes[s].Name]
			if !ok {
				continue next
			}
			counts[t] = c
		}
		out = append(out, lpbound.Pattern{Kind: k, Counts: counts})
	}
	return out
}

// mipTerms are what a model adds to the integer program: objective
// terms and constraint rows in CPLEX LP format, over continuous
// variables of its own.
type mipTerms struct {
	objective []string
	rows      []string
	// start, when set, is a plan CBC starts from: how many nodes of each
	// pattern (by index); CBC works out the terms' own variables.
	start map[int]int
}

// commitmentTerms model the bill under cm. For each kind whose pool may
// launch it on-demand, r (one per RI that covers its type) and s (one per
// plan with a rate under the kind's price) are how many of its nodes each
// covers: together no more than the kind's nodes. An RI covers its units,
// each node taking its normalization units (commitment.Takes); a plan
// covers its commitment in dollars at its rates. A node an RI covers
// costs nothing, one a plan covers its rate, any other its kind's price.
func commitmentTerms(m scheduling.Packing, patterns []lpbound.Pattern, cm commitment.Commitments, snap scheduling.Snapshot) (mipTerms, error) {
	onDemand := map[string]bool{}
	for _, p := range snap.NodePools {
		reqs, err := requirements.FromNodeSelectorRequirements(p.NodePool.Spec.Template.Spec.Requirements...)
		if err != nil {
			return mipTerms{}, err
		}
		r := reqs[v1.LabelCapacityType]
		onDemand[p.NodePool.Name] = r == nil || r.Has(commitment.OnDemand)
	}
	var t mipTerms
	riUse := make([][]string, len(cm.ReservedInstances))
	planUse := make([][]string, len(cm.SavingsPlans))
	for k, info := range m.KindInfo {
		if !onDemand[info.NodePool] {
			continue
		}
		price := m.Kinds[k].Price
		var cover []string
		for j, ri := range cm.ReservedInstances {
			if takes := commitment.Takes(ri, info.InstanceType, info.Zone); takes > 0 {
				v := fmt.Sprintf("r%d_%d", j, k)
				cover = append(cover, v)
				t.objective = append(t.objective, fmt.Sprintf("- %.10g %s", price, v))
				riUse[j] = append(riUse[j], fmt.Sprintf("%.10g %s", takes, v))
			}
		}
		for j, p := range cm.SavingsPlans {
			if rate := p.Rates[info.InstanceType]; rate > 0 && rate < price {
				v := fmt.Sprintf("s%d_%d", j, k)
				cover = append(cover, v)
				t.objective = append(t.objective, fmt.Sprintf("- %.10g %s", price-rate, v))
				planUse[j] = append(planUse[j], fmt.Sprintf("%.10g %s", rate, v))
			}
		}
		if len(cover) == 0 {
			continue
		}
		row := fmt.Sprintf(" c%d: %s", k, strings.Join(cover, " + "))
		for i, p := range patterns {
			if p.Kind == k {
				row += fmt.Sprintf(" - x%d", i)
			}
		}
		t.rows = append(t.rows, row+" <= 0")
	}
	for j, ri := range cm.ReservedInstances {
		if len(riUse[j]) > 0 {
			t.rows = append(t.rows, fmt.Sprintf(" ri%d: %s <= %.10g", j, strings.Join(riUse[j], " + "), ri.Units()))
		}
	}
	for j, p := range cm.SavingsPlans {
		if len(planUse[j]) > 0 {
			t.rows = append(t.rows, fmt.Sprintf(" sp%d: %s <= %.10g", j, strings.Join(planUse[j], " + "), p.Commitment))
		}
	}
	return t, nil
}

// gradeRandomCommitted grades the random mixes under their commitment
// mixes (gradeCommitted), with the median and 95th percentile of plan ÷
// best integer on the bill.
func gradeRandomCommitted(its []*cloudprovider.InstanceType, dir string, sec int) error {
	fmt.Println("| mix | pods | plan on the bill $/h | nodes | plan time | best integer on the bill $/h | CBC's bound $/h | plan ÷ best integer | plan ÷ bound | baseline time |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	var toBest, toBound []float64
	for _, w := range randomMixes {
		r, err := gradeCommitted(w, its, dir, sec)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", w.name, w.about, err)
		}
		toBest, toBound = append(toBest, r.plan/r.integer), append(toBound, r.plan/r.bound)
		fmt.Printf("| %s | %d | %.2f | %d | %s | %.2f%s | %.2f | **%.4f** | %.4f | %s |\n", w.name, r.pods, r.plan, r.nodes, r.planTime.Round(time.Millisecond),
			r.integer, r.status, r.bound, r.plan/r.integer, r.plan/r.bound, r.baseTime.Round(100*time.Millisecond))
	}
	fmt.Printf("\n%d mixes under commitments: plan ÷ best integer median %.4f, 95th percentile %.4f, worst %.4f; plan ÷ CBC's bound median %.4f, 95th percentile %.4f\n",
		len(toBest), quantile(toBest, 0.5), quantile(toBest, 0.95), quantile(toBest, 1), quantile(toBound, 0.5), quantile(toBound, 0.95))
	for _, w := range randomMixes {
		fmt.Printf("- %s: %s\n", w.name, w.about)
	}
	return nil
}

// startOf counts the plan's nodes by their pattern's index in patterns,
// for CBC's start; nil when some node's pattern is not there.
func startOf(plan, patterns []lpbound.Pattern) map[int]int {
	index := map[string]int{}
	for i, p := range patterns {
		index[fmt.Sprint(p.Kind, p.Counts)] = i
	}
	start := map[int]int{}
	for _, p := range plan {
		i, ok := index[fmt.Sprint(p.Kind, p.Counts)]
		if !ok {
			return nil
		}
		start[i]++
	}
	return start
}
