package viewer

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
)

// CommitmentsFunc gives a region's active Reserved Instances and Savings
// Plans, as the controller reads them (aws/commitments).
type CommitmentsFunc func(region string) (commitment.Commitments, error)

// applyCommitments prices the priced EC2 nodes of each region as the
// bill does under the region's commitments (commitment.Apply, the
// controller's own model): Effective on each line, EffectivePerHour in
// the header, and what each commitment leaves idle in the footer. Spot
// and kwok nodes are at list.
func (s *Snapshot) applyCommitments(read CommitmentsFunc) {
	s.EffectivePerHour = s.PricePerHour
	for i := range s.Nodes {
		s.Nodes[i].Effective = s.Nodes[i].Price
	}
	if read == nil {
		return
	}
	byRegion := map[string][]int{}
	for i, n := range s.Nodes {
		if n.Cloud == CloudAWS && n.Priced {
			byRegion[n.Region] = append(byRegion[n.Region], i)
		}
	}
	for _, region := range slices.Sorted(maps.Keys(byRegion)) {
		cm, err := read(region)
		if err != nil {
			s.CommitmentNotes = append(s.CommitmentNotes, fmt.Sprintf("%s: not read (%s)", region, firstLine(err.Error())))
		}
		if len(cm.ReservedInstances) == 0 && len(cm.SavingsPlans) == 0 {
			continue
		}
		s.Committed = true
		var instances []commitment.Instance
		for _, i := range byRegion[region] {
			n := s.Nodes[i]
			ct := n.CapacityType
			if ct == "" {
				ct = v1.CapacityTypeOnDemand
			}
			instances = append(instances, commitment.Instance{ID: n.Name, Type: n.InstanceType, Zone: n.Zone, CapacityType: ct, ListPrice: n.Price})
		}
		cov := commitment.Apply(cm, instances)
		for _, i := range byRegion[region] {
			n := &s.Nodes[i]
			n.Effective = cov.Effective[n.Name]
			s.EffectivePerHour -= n.Price - n.Effective
		}
		s.CommitmentNotes = append(s.CommitmentNotes, commitmentNotes(cm, cov)...)
	}
}

// commitmentNotes say how much of each commitment is used: an RI in its
// instances (of its own size), a Savings Plan in dollars an hour, idle
// first where any is.
func commitmentNotes(cm commitment.Commitments, cov commitment.Coverage) []string {
	var out []string
	for _, ri := range cm.ReservedInstances {
		total := ri.Units()
		used := (total - cov.Left[ri.ID]) / total * float64(ri.Count)
		where := "regional"
		if ri.Zone != "" {
			where = ri.Zone
		}
		out = append(out, fmt.Sprintf("RI %s ×%d (%s): %.4g in use, %.4g idle", ri.Type, ri.Count, where, used, float64(ri.Count)-used))
	}
	for _, sp := range cm.SavingsPlans {
		kind := "Compute"
		if sp.EC2Instance {
			kind = "EC2 Instance"
		}
		left := cov.Left[sp.ID]
		out = append(out, fmt.Sprintf("%s Savings Plan %s/h: %s/h in use, %s/h idle", kind, dollars(sp.Commitment, 2), dollars(sp.Commitment-left, 4), dollars(left, 4)))
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.HasPrefix(out[i], "RI") && !strings.HasPrefix(out[j], "RI") })
	return out
}
