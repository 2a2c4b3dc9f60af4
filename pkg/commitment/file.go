package commitment

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

// file is what `joiner plan --commitments` and hack/optimum read: the account's
// Reserved Instances and Savings Plans, named as the EC2 and Savings Plans
// APIs name them. A plan's rates are the catalog's on-demand prices less
// its discount (the plan's published rates are per type; offline, one
// discount stands for them).
type file struct {
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

// ReadFile reads a commitments file (docs/cost.md gives the format), a
// plan's rates priced from the types' on-demand offerings. Errors name
// the flag, the file, the field and the fix.
func ReadFile(path string, its []*cloudprovider.InstanceType) (Commitments, error) {
	var out Commitments
	raw, err := os.ReadFile(path)
	if err != nil {
		return out, fmt.Errorf("--commitments: %w", err)
	}
	var f file
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
		out.ReservedInstances = append(out.ReservedInstances, ReservedInstance{ID: fmt.Sprintf("ri-%d", i), Type: ri.InstanceType, Zone: ri.AvailabilityZone, Count: ri.InstanceCount})
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
		family := ""
		if ec2 {
			family = sp.Ec2InstanceFamily
		}
		out.SavingsPlans = append(out.SavingsPlans, SavingsPlan{ID: fmt.Sprintf("sp-%d", i), EC2Instance: ec2, Commitment: sp.Commitment, Rates: DiscountedRates(its, sp.Discount, family)})
	}
	return out, nil
}

// DiscountedRates are a Savings Plan's rates at one discount off the
// types' on-demand prices: every type's, or one family's ("m5") for an EC2
// Instance plan. Offline, one discount stands for the plan's published
// per-type rates.
func DiscountedRates(its []*cloudprovider.InstanceType, discount float64, family string) map[string]float64 {
	rates := map[string]float64{}
	for _, it := range its {
		if family != "" && !strings.HasPrefix(it.Name, family+".") {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == OnDemand && o.Price > 0 {
				rates[it.Name] = o.Price * (1 - discount)
			}
		}
	}
	return rates
}
