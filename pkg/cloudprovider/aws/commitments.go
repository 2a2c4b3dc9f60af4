package aws

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
)

// CommitmentReader gives the region's active Reserved Instances and
// Savings Plans (aws/commitments).
type CommitmentReader interface {
	Get(ctx context.Context) (commitment.Commitments, error)
}

// withCommitments adds to each type's on-demand offerings one per
// commitment with room for another instance of it in that zone, priced as
// the bill would (nothing under an RI, the rate under a Savings Plan),
// after the cluster's NodeClaims have taken what the bill gives them. The
// planner hands the rooms out (scheduling's room.go); the launch of a
// NodeClaim it pinned to one is an ordinary on-demand launch, which the
// bill then covers. Only planning reads these offerings: a launch prices
// its own options at list.
func (c *CloudProvider) withCommitments(ctx context.Context, its []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	if c.opts.Commitments == nil {
		return its
	}
	cm, err := c.opts.Commitments.Get(ctx)
	if err != nil {
		// The last good reading, if any, is still priced with.
		log.FromContext(ctx).V(1).Info("reading commitments", "error", err.Error())
	}
	if len(cm.ReservedInstances) == 0 && len(cm.SavingsPlans) == 0 {
		return its
	}
	fleet, err := c.fleet(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing NodeClaims to price commitments; planning at list prices")
		return its
	}
	// An RI's room is priced just above a capacity reservation's, so
	// that a paid-for reservation fills first (the RI discounts its
	// instances too).
	return commitment.WithRooms(cm, commitment.Apply(cm, fleet), its, 2*reservedPriceFactor)
}

// Bill is each NodeClaim's effective price under the commitments
// (commitment.Apply), what some save going together (commitment.Savings;
// consolidation prices its candidates with it), and how much of each
// commitment they use; the zero Bill without commitments (list prices
// hold).
func (c *CloudProvider) Bill(ctx context.Context) (cloudprovider.Bill, error) {
	if c.opts.Commitments == nil {
		return cloudprovider.Bill{}, nil
	}
	cm, err := c.opts.Commitments.Get(ctx)
	if len(cm.ReservedInstances) == 0 && len(cm.SavingsPlans) == 0 {
		return cloudprovider.Bill{}, err
	}
	fleet, err := c.fleet(ctx)
	if err != nil {
		return cloudprovider.Bill{}, err
	}
	cov := commitment.Apply(cm, fleet)
	saving := commitment.Savings(cm, fleet)
	out := cloudprovider.Bill{Effective: cov.Effective,
		Saving: func(names []string) float64 {
			removed := make(map[string]bool, len(names))
			for _, n := range names {
				removed[n] = true
			}
			return saving(removed)
		}}
	for _, ri := range cm.ReservedInstances {
		total := ri.Units()
		out.Commitments = append(out.Commitments, cloudprovider.CommitmentUse{ID: ri.ID, Kind: cloudprovider.CommitmentReservedInstance, Used: total - cov.Left[ri.ID], Total: total})
	}
	for _, sp := range cm.SavingsPlans {
		out.Commitments = append(out.Commitments, cloudprovider.CommitmentUse{ID: sp.ID, Kind: cloudprovider.CommitmentSavingsPlan, Used: sp.Commitment - cov.Left[sp.ID], Total: sp.Commitment})
	}
	return out, nil
}

// fleet is the cluster's NodeClaims as the bill sees them, at the list
// prices of their classes' types: launched ones by their labels, those
// still launching by their requirements when these name one type (a
// NodeClaim the planner gave a commitment's room names its type, zone and
// capacity type), so that the next batch does not count the same room.
func (c *CloudProvider) fleet(ctx context.Context) ([]commitment.Instance, error) {
	var claims v1.NodeClaimList
	if err := c.opts.NodeClasses.List(ctx, &claims); err != nil {
		return nil, err
	}
	prices := map[string]map[string]float64{} // class → "type/capacity type/zone" → list
	var out []commitment.Instance
	for _, nc := range claims.Items {
		typ, zone, ct := launchedAs(&nc, corev1.LabelInstanceTypeStable), launchedAs(&nc, corev1.LabelTopologyZone), launchedAs(&nc, v1.LabelCapacityType)
		if typ == "" || nc.Spec.NodeClassRef == nil {
			continue
		}
		class := nc.Spec.NodeClassRef.Name
		if prices[class] == nil {
			prices[class] = map[string]float64{}
			if ec2nc, err := c.nodeClassOf(ctx, nc.Spec.NodeClassRef); err == nil && ec2nc != nil {
				its, err := c.opts.InstanceTypes.List(ctx, ec2nc)
				if err != nil {
					return nil, err
				}
				for _, it := range its {
					for _, o := range it.Offerings {
						prices[class][it.Name+"/"+o.CapacityType+"/"+o.Zone] = o.Price
					}
				}
			}
		}
		list := prices[class][typ+"/"+ct+"/"+zone]
		if ct == v1.CapacityTypeReserved {
			// A capacity reservation is paid for whether used or not: its
			// instance is priced as planning prices it, and saves next
			// to nothing when it goes (an RI may still count it).
			list = reservedPriceFactor * prices[class][typ+"/"+instance.CapacityTypeOnDemand+"/"+zone]
		}
		out = append(out, commitment.Instance{ID: nc.Name, Type: typ, Zone: zone, CapacityType: ct, ListPrice: list})
	}
	return out, nil
}

// launchedAs is the NodeClaim's label key, or, before its launch, the one
// value its requirements allow; "" when neither says.
func launchedAs(nc *v1.NodeClaim, key string) string {
	if v := nc.Labels[key]; v != "" {
		return v
	}
	for _, r := range nc.Spec.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}
