package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// commitmentsFile is what `joiner plan --commitments` reads: the account's
// Reserved Instances and Savings Plans, named as the EC2 and Savings Plans
// APIs name them. A plan's rates are the catalog's on-demand prices less
// its discount (the plan's published rates are per type; offline, one
// discount stands for them).
type commitmentsFile struct {
	ReservedInstances []struct {
		InstanceType     string `json:"instanceType"`
		InstanceCount    int    `json:"instanceCount"`
		AvailabilityZone string `json:"availabilityZone,omitempty"`
	} `json:"reservedInstances"`
	SavingsPlans []struct {
		SavingsPlanType   string  `json:"savingsPlanType"`
		Commitment        float64 `json:"commitment"`
		Discount          float64 `json:"discount"`
		Ec2InstanceFamily string  `json:"ec2InstanceFamily,omitempty"`
	} `json:"savingsPlans"`
}

// readCommitments reads a commitments file, priced from the catalog.
func readCommitments(path string, its []*cloudprovider.InstanceType) (commitment.Commitments, error) {
	var out commitment.Commitments
	raw, err := os.ReadFile(path)
	if err != nil {
		return out, fmt.Errorf("--commitments: %w", err)
	}
	var f commitmentsFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return out, fmt.Errorf("--commitments %s: %w; see docs/cost.md for the format", path, err)
	}
	known := map[string]*cloudprovider.InstanceType{}
	for _, it := range its {
		known[it.Name] = it
	}
	for i, ri := range f.ReservedInstances {
		field := fmt.Sprintf("--commitments %s: reservedInstances[%d]", path, i)
		if known[ri.InstanceType] == nil {
			return out, fmt.Errorf("%s.instanceType: %q is not an instance type of the catalog's region", field, ri.InstanceType)
		}
		if ri.InstanceCount < 1 {
			return out, fmt.Errorf("%s.instanceCount: %d; set how many instances the reservation covers, at least 1", field, ri.InstanceCount)
		}
		out.ReservedInstances = append(out.ReservedInstances, commitment.ReservedInstance{ID: fmt.Sprintf("ri-%d", i), Type: ri.InstanceType, Zone: ri.AvailabilityZone, Count: ri.InstanceCount})
	}
	for i, sp := range f.SavingsPlans {
		field := fmt.Sprintf("--commitments %s: savingsPlans[%d]", path, i)
		ec2 := false
		switch sp.SavingsPlanType {
		case "Compute":
		case "EC2Instance":
			ec2 = true
			if sp.Ec2InstanceFamily == "" {
				return out, fmt.Errorf("%s.ec2InstanceFamily: an EC2Instance plan covers one family; name it (m5, say)", field)
			}
		default:
			return out, fmt.Errorf("%s.savingsPlanType: %q; use Compute or EC2Instance", field, sp.SavingsPlanType)
		}
		if sp.Commitment <= 0 {
			return out, fmt.Errorf("%s.commitment: set the plan's dollars per hour, 1.00 say", field)
		}
		if sp.Discount <= 0 || sp.Discount >= 1 {
			return out, fmt.Errorf("%s.discount: %v; set the share off on-demand prices, between 0 and 1 (0.3 for 30%%)", field, sp.Discount)
		}
		rates := map[string]float64{}
		for _, it := range its {
			if ec2 && !strings.HasPrefix(it.Name, sp.Ec2InstanceFamily+".") {
				continue
			}
			for _, o := range it.Offerings {
				if o.CapacityType == commitment.OnDemand && o.Price > 0 {
					rates[it.Name] = o.Price * (1 - sp.Discount)
				}
			}
		}
		out.SavingsPlans = append(out.SavingsPlans, commitment.SavingsPlan{ID: fmt.Sprintf("sp-%d", i), EC2Instance: ec2, Commitment: sp.Commitment, Rates: rates})
	}
	return out, nil
}

// withRooms gives the snapshot's pools the commitments' rooms, after the
// existing nodes the manifests give have taken theirs, as the controller
// gives them (aws's withCommitments): the plan then fills paid-for
// commitments first. An RI's room is priced a token above nothing.
func withRooms(cm commitment.Commitments, snap scheduling.Snapshot) scheduling.Snapshot {
	left := commitment.Apply(cm, existingFleet(snap))
	pools := make([]scheduling.NodePool, len(snap.NodePools))
	for i, p := range snap.NodePools {
		p.InstanceTypes = commitment.WithRooms(cm, left, p.InstanceTypes, 1e-6)
		pools[i] = p
	}
	snap.NodePools = pools
	return snap
}

// existingFleet is the manifests' nodes as the bill sees them.
func existingFleet(snap scheduling.Snapshot) []commitment.Instance {
	var fleet []commitment.Instance
	for _, n := range snap.Nodes {
		typ, zone, ct := n.Labels["node.kubernetes.io/instance-type"], n.Labels["topology.kubernetes.io/zone"], n.Labels["karpenter.sh/capacity-type"]
		if typ == "" {
			continue
		}
		price := 0.0
		for _, p := range snap.NodePools {
			for _, it := range p.InstanceTypes {
				if it.Name == typ {
					price = max(price, offeringPrice(it, zone, ct))
				}
			}
		}
		fleet = append(fleet, commitment.Instance{ID: "node/" + n.Name, Type: typ, Zone: zone, CapacityType: ct, ListPrice: price})
	}
	return fleet
}

// planBill prices a plan's NodeClaims on the bill: the commitments
// applied to the existing nodes the manifests give and the new
// NodeClaims, each at its offering's price without a commitment's room
// (NodeOverlays included).
func planBill(cm commitment.Commitments, snap scheduling.Snapshot, plan *scheduling.Plan) map[*scheduling.NewNodeClaim]float64 {
	fleet := existingFleet(snap)
	for i, nc := range plan.NewNodeClaims {
		fleet = append(fleet, commitment.Instance{ID: fmt.Sprint(i), Type: nc.InstanceType.Name, Zone: nc.Offering.Zone, CapacityType: nc.Offering.CapacityType,
			ListPrice: offeringPrice(nc.InstanceType, nc.Offering.Zone, nc.Offering.CapacityType)})
	}
	cov := commitment.Apply(cm, fleet)
	out := map[*scheduling.NewNodeClaim]float64{}
	for i, nc := range plan.NewNodeClaims {
		out[nc] = cov.Effective[fmt.Sprint(i)]
	}
	return out
}

// offeringPrice is the type's price in the zone and capacity type, not a
// commitment's room; 0 when it has none.
func offeringPrice(it *cloudprovider.InstanceType, zone, ct string) float64 {
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == ct && !o.Limited() {
			return o.Price
		}
	}
	return 0
}
