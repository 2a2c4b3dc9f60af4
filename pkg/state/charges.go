package state

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
)

// Charge is what a NodeClaim costs an hour: at list, and on the bill
// under the account's commitments.
type Charge struct {
	List, Effective float64
}

// Charges prices NodeClaims for the cost metrics and the spend caps. A
// launched NodeClaim costs its offering's list price (its type, zone and
// capacity type, read from its labels); one still launching costs the
// dearest offering its requirements allow, since the launch may land on
// any of them. Effective prices come from the bill (cloudprovider.Bill);
// a NodeClaim it leaves out costs its list price there too. types are the
// NodeClaim's pool's instance types, as planning lists them; offerings
// that are a commitment's room (Offering.Room) are planning's alone and
// never a list price.
func Charges(nc *v1.NodeClaim, types []*cloudprovider.InstanceType, effective map[string]float64) Charge {
	var c Charge
	if typ := nc.Labels[corev1.LabelInstanceTypeStable]; typ != "" {
		zone, ct := nc.Labels[corev1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType]
		for _, it := range types {
			if it.Name == typ {
				c.List, _ = it.ListPrice(zone, ct)
			}
		}
	} else {
		c.List = dearestOption(nc, types)
	}
	c.Effective = c.List
	if e, ok := effective[nc.Name]; ok {
		c.Effective = e
	}
	return c
}

// dearestOption is the highest list price among the offerings a
// NodeClaim's requirements allow (instance type, zone, capacity type).
func dearestOption(nc *v1.NodeClaim, types []*cloudprovider.InstanceType) float64 {
	allowed := map[string]map[string]bool{}
	for _, r := range nc.Spec.Requirements {
		if r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		switch r.Key {
		case corev1.LabelInstanceTypeStable, corev1.LabelTopologyZone, v1.LabelCapacityType:
			allowed[r.Key] = map[string]bool{}
			for _, v := range r.Values {
				allowed[r.Key][v] = true
			}
		}
	}
	ok := func(key, v string) bool { return allowed[key] == nil || allowed[key][v] }
	dearest := 0.0
	for _, it := range types {
		if !ok(corev1.LabelInstanceTypeStable, it.Name) {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Limited() && o.Available && ok(corev1.LabelTopologyZone, o.Zone) && ok(v1.LabelCapacityType, o.CapacityType) {
				dearest = max(dearest, o.Price)
			}
		}
	}
	return dearest
}

// cappedPools are the planning NodePools with a spend cap.
func cappedPools(pools []v1.NodePool, typesByPool map[string][]*cloudprovider.InstanceType) map[string]bool {
	out := map[string]bool{}
	for i := range pools {
		if _, ok, _ := spendcap.Of(&pools[i]); ok && typesByPool[pools[i].Name] != nil {
			out[pools[i].Name] = true
		}
	}
	return out
}

// effectivePrices are the NodeClaims' prices on the bill, for the nodes
// of capped pools to count against their caps: nil when list prices hold
// (no commitments, or no Biller), and not read when no pool has a cap. A bill that cannot be read counts every node at list, which only
// ever overstates what a pool spends.
func (c *Cluster) effectivePrices(ctx context.Context, capped map[string]bool) map[string]float64 {
	b, ok := c.CloudProvider.(cloudprovider.Biller)
	if len(capped) == 0 || !ok {
		return nil
	}
	bill, err := b.Bill(ctx)
	if err != nil {
		log.FromContext(ctx).V(1).Info("reading the bill for the spend caps; counting nodes at list prices", "error", err.Error())
	}
	return bill.Effective
}
