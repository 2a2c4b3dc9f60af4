package aws

import (
	"context"
	"slices"

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
	left := commitment.Apply(cm, fleet)
	out := make([]*cloudprovider.InstanceType, len(its))
	for i, it := range its {
		var extra []cloudprovider.Offering
		for _, o := range it.Offerings {
			if o.CapacityType != instance.CapacityTypeOnDemand || !o.Available || o.Limited() {
				continue
			}
			for _, r := range commitment.Rooms(cm, left, it.Name, o.Zone, o.Price) {
				price := r.Price
				if price == 0 {
					// An RI's room: priced just above a capacity
					// reservation's, so that a paid-for reservation
					// fills first (the RI discounts its instances too).
					price = 2 * reservedPriceFactor * o.Price
				}
				extra = append(extra, cloudprovider.Offering{Zone: o.Zone, CapacityType: o.CapacityType, Price: price, Available: true,
					Room: cloudprovider.Room{ID: r.ID, Left: r.Left, Takes: r.Takes}})
			}
		}
		out[i] = it
		if len(extra) > 0 {
			cp := it.Copy()
			cp.Offerings = append(slices.Clone(it.Offerings), extra...)
			out[i] = cp
		}
	}
	return out
}

// MarginalPrices are what the bill saves per hour when each NodeClaim
// goes, by name, under the commitments (commitment.Marginal); nil without
// commitments (list prices hold). Consolidation prices its candidates
// with them: a node the RIs cover saves nothing when it goes.
func (c *CloudProvider) MarginalPrices(ctx context.Context) (map[string]float64, error) {
	if c.opts.Commitments == nil {
		return nil, nil
	}
	cm, err := c.opts.Commitments.Get(ctx)
	if len(cm.ReservedInstances) == 0 && len(cm.SavingsPlans) == 0 {
		return nil, err
	}
	fleet, err := c.fleet(ctx)
	if err != nil {
		return nil, err
	}
	return commitment.Marginal(cm, fleet), nil
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
