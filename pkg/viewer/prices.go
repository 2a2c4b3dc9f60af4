package viewer

import (
	"strings"
	"sync"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/pricing"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// Clouds a node can belong to, told apart by its provider ID.
const (
	CloudKwok = "kwok"
	CloudAWS  = "aws"
)

// CloudOf names the cloud of a provider ID: kwok:// for the kwok provider,
// aws:/// for EC2, "" when it is empty or of another cloud. The provider ID
// decides, not a flag, because it is the one fact every Node and launched
// NodeClaim carries that says which controller made it and so which prices
// it was chosen by.
func CloudOf(providerID string) string {
	switch {
	case strings.HasPrefix(providerID, "kwok://"):
		return CloudKwok
	case strings.HasPrefix(providerID, "aws://"):
		return CloudAWS
	}
	return ""
}

// Machine is what a price depends on.
type Machine struct {
	Cloud, Region, Zone, InstanceType, CapacityType string
}

// Prices answer what machines cost, from the controller's own pricing code:
// a pricing.Provider per cloud and region. For kwok that provider has no AWS
// clients, so it answers from the embedded catalog exactly as the kwok
// cloud provider prices its offerings; for AWS it is the provider the
// controller runs (Price List API for on-demand, spot price history for
// spot), falling back to the catalog until a refresh succeeds.
type Prices struct {
	// AWS returns the region's provider for aws nodes and a note on where
	// its prices come from; nil prices aws nodes from the catalog too.
	AWS func(region string) (*pricing.Provider, string)
	// Commitments, when set, give a region's Reserved Instances and
	// Savings Plans: EC2 nodes are then priced on the bill as well.
	Commitments CommitmentsFunc

	mu   sync.Mutex
	kwok map[string]*pricing.Provider
}

func (p *Prices) provider(cloud, region string) (*pricing.Provider, string) {
	if region == "" {
		region = catalog.DefaultRegion
	}
	if cloud == CloudAWS && p.AWS != nil {
		return p.AWS(region)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kwok == nil {
		p.kwok = map[string]*pricing.Provider{}
	}
	pr, ok := p.kwok[region]
	if !ok {
		pr = pricing.New(pricing.Options{Region: region, Isolated: true})
		p.kwok[region] = pr
	}
	if cloud == CloudAWS {
		return pr, "aws nodes: embedded catalog"
	}
	return pr, "kwok nodes: embedded catalog"
}

// Price is the machine's $/h, false when its source has none.
func (p *Prices) Price(m Machine) (float64, bool) {
	if m.InstanceType == "" {
		return 0, false
	}
	pr, _ := p.provider(m.Cloud, m.Region)
	switch m.CapacityType {
	case v1.CapacityTypeSpot:
		if m.Zone == "" {
			return 0, false
		}
		return pr.Spot(m.InstanceType, m.Zone)
	case v1.CapacityTypeOnDemand, "":
		return pr.OnDemand(m.InstanceType)
	}
	return 0, false
}

// Note says where the cloud's prices come from, for the footer.
func (p *Prices) Note(cloud, region string) string {
	_, note := p.provider(cloud, region)
	return note
}

// InstanceTypes are the catalog's types in region and zones, priced like the
// nodes, for the LP bound. Offerings without a price are unavailable.
func (p *Prices) InstanceTypes(cloud, region string, zones []string) ([]*cloudprovider.InstanceType, error) {
	if region == "" {
		region = catalog.DefaultRegion
	}
	its, err := catalog.InstanceTypes(catalog.Options{Region: region, Zones: zones})
	if err != nil {
		return nil, err
	}
	for _, it := range its {
		for i := range it.Offerings {
			o := &it.Offerings[i]
			price, ok := p.Price(Machine{Cloud: cloud, Region: region, Zone: o.Zone, InstanceType: it.Name, CapacityType: o.CapacityType})
			o.Price, o.Available = price, ok && o.Available
		}
	}
	return its, nil
}
