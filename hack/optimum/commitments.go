package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// commitmentMix is the account a held workload is billed under, as many
// accounts have one: regional m5 RIs (size-flexible within the family)
// bought years ago for a quarter of the list-price plan's CPUs, in
// m5.2xlarge units, where the list-price plan picks newer, cheaper
// families; and a Compute Savings Plan at 30% off whose commitment is a
// fifth of that plan's on-demand spend at the plan's rates.
func commitmentMix(plan *scheduling.Plan, its []*cloudprovider.InstanceType) commitment.Commitments {
	onDemand, cpus := 0.0, int64(0)
	for _, nc := range plan.NewNodeClaims {
		cpus += nc.InstanceType.Capacity.Cpu().Value()
		if nc.Offering.CapacityType == commitment.OnDemand {
			onDemand += nc.Price()
		}
	}
	var cm commitment.Commitments
	if n := int(cpus / 4 / 8); n > 0 {
		cm.ReservedInstances = []commitment.ReservedInstance{{ID: "ri-1", Type: "m5.2xlarge", Count: n}}
	}
	if onDemand > 0 {
		cm.SavingsPlans = []commitment.SavingsPlan{{ID: "sp-1", Commitment: 0.2 * 0.7 * onDemand, Rates: commitment.DiscountedRates(its, 0.3, "")}}
	}
	return cm
}

// gradeCommitments plans each held workload at list prices and with a
// commitment mix (commitmentMix), and prints what each plan costs on the
// bill under that mix, and each plan's time.
func gradeCommitments(ws []workload, its []*cloudprovider.InstanceType, dir string) error {
	fmt.Println("| workload | pods | commitments | list-price plan, at list $/h | list-price plan, on the bill $/h | plan with commitments, on the bill $/h | saved | plan time at list | plan time with commitments |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, w := range ws {
		snap, err := snapshotOf(w, its, dir)
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		var listed, committed *scheduling.Plan
		listTime := medianTime(func() { listed = scheduling.Solve(snap, scheduling.Options{}) })
		cm := commitmentMix(listed, its)
		committedSnap := scheduling.WithCommitments(cm, snap)
		commitTime := medianTime(func() { committed = scheduling.Solve(committedSnap, scheduling.Options{}) })
		if len(committed.Unschedulable) > len(listed.Unschedulable) {
			return fmt.Errorf("%s: %d pods unschedulable with commitments", w.name, len(committed.Unschedulable))
		}
		before, after := total(scheduling.Bill(cm, snap, listed)), total(scheduling.Bill(cm, committedSnap, committed))
		mix := "none"
		if len(cm.ReservedInstances) > 0 {
			mix = fmt.Sprintf("%d %s RIs", cm.ReservedInstances[0].Count, cm.ReservedInstances[0].Type)
		}
		if len(cm.SavingsPlans) > 0 {
			mix += fmt.Sprintf(", $%.2f/h plan", cm.SavingsPlans[0].Commitment)
		}
		fmt.Printf("| %s | %d | %s | %.2f | %.2f | %.2f | %.1f%% | %s | %s |\n", w.name, len(snap.Pods), mix, listed.TotalPrice(), before, after,
			100*(before-after)/before, listTime.Round(time.Millisecond), commitTime.Round(time.Millisecond))
	}
	return nil
}

// medianTime is the median of five runs of f: one plan's time varies by
// a third from run to run with the garbage collector.
func medianTime(f func()) time.Duration {
	ts := make([]time.Duration, 5)
	for i := range ts {
		start := time.Now()
		f()
		ts[i] = time.Since(start)
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

func total(m map[*scheduling.NewNodeClaim]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}
