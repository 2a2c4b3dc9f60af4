// Package catalog is the embedded list of real EC2 instance types (labels,
// allocatable resources and us-east-1 on-demand prices) that the kwok cloud
// provider and the offline planner price plans with.
//
// Prices outside us-east-1 and spot prices are not in the data, so they come
// from a deterministic model (see docs/kwok-pricing.md): the same inputs always
// give the same plan, which tests and benchmarks need.
package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"sync"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

//go:embed aws-instance-types.json
var raw []byte

// Well-known labels that vary per offering or per region.
const (
	LabelZone   = corev1.LabelTopologyZone
	LabelRegion = corev1.LabelTopologyRegion
)

// DefaultRegion and DefaultZones describe the catalog when nothing is configured.
const DefaultRegion = "us-east-1"

// DefaultZones returns region's zones a, b and c.
func DefaultZones(region string) []string {
	return []string{region + "a", region + "b", region + "c"}
}

// regionFactors scale us-east-1 on-demand prices to other regions. They are
// rounded averages of public list prices, good enough to rank plans.
var regionFactors = map[string]float64{
	"us-east-1": 1.00, "us-east-2": 1.00, "us-west-2": 1.00, "us-west-1": 1.17,
	"ca-central-1": 1.10, "eu-west-1": 1.11, "eu-central-1": 1.15, "eu-west-2": 1.16,
	"ap-northeast-1": 1.27, "ap-northeast-2": 1.20, "ap-southeast-1": 1.22, "ap-southeast-2": 1.24,
	"ap-south-1": 1.05, "sa-east-1": 1.55,
}

// UnknownRegionFactor prices a region the table does not list.
const UnknownRegionFactor = 1.20

// Spot prices are on-demand × (SpotMinDiscount + SpotDiscountSpan × u) where u
// in [0,1) is derived from a hash of the type and zone: a stable 30%–65% of
// on-demand that differs between zones, as real spot markets do.
const (
	SpotMinFraction  = 0.30
	SpotFractionSpan = 0.35
)

type entry struct {
	Name        string             `json:"name"`
	Labels      map[string]string  `json:"labels"`
	Allocatable map[string]string  `json:"allocatable"`
	OnDemand    map[string]float64 `json:"onDemandPriceUSDPerHour"`
}

var (
	parseOnce sync.Once
	parsed    []entry
	parseErr  error
)

func entries() ([]entry, error) {
	parseOnce.Do(func() {
		var doc struct {
			InstanceTypes []entry `json:"instanceTypes"`
		}
		parseErr = json.Unmarshal(raw, &doc)
		parsed = doc.InstanceTypes
	})
	return parsed, parseErr
}

// Options select the region and zones offered.
type Options struct {
	Region string
	Zones  []string
}

// InstanceTypes returns every priced instance type with on-demand and spot
// offerings in each zone, sorted by name. Types without a price in the data
// are left out: a plan cannot rank what it cannot price.
func InstanceTypes(opts Options) ([]*cloudprovider.InstanceType, error) {
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if len(opts.Zones) == 0 {
		opts.Zones = DefaultZones(opts.Region)
	}
	es, err := entries()
	if err != nil {
		return nil, fmt.Errorf("embedded catalog: %w", err)
	}
	factor, ok := regionFactors[opts.Region]
	if !ok {
		factor = UnknownRegionFactor
	}
	out := make([]*cloudprovider.InstanceType, 0, len(es))
	for _, e := range es {
		base, ok := e.OnDemand[DefaultRegion]
		if !ok || base <= 0 {
			continue
		}
		it, err := build(e, opts, round4(base*factor))
		if err != nil {
			return nil, fmt.Errorf("embedded catalog, %s: %w", e.Name, err)
		}
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func build(e entry, opts Options, onDemand float64) (*cloudprovider.InstanceType, error) {
	alloc := corev1.ResourceList{}
	for k, v := range e.Allocatable {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("allocatable %s: %w", k, err)
		}
		alloc[corev1.ResourceName(k)] = q
	}
	capacity := alloc.DeepCopy()
	if cpu, err := strconv.ParseInt(e.Labels["karpenter.k8s.aws/instance-cpu"], 10, 64); err == nil {
		capacity[corev1.ResourceCPU] = *resource.NewQuantity(cpu, resource.DecimalSI)
	}
	if mib, err := strconv.ParseInt(e.Labels["karpenter.k8s.aws/instance-memory"], 10, 64); err == nil {
		capacity[corev1.ResourceMemory] = *resource.NewQuantity(mib*1024*1024, resource.BinarySI)
	}
	labels := make(map[string]string, len(e.Labels)+1)
	for k, v := range e.Labels {
		labels[k] = v
	}
	labels[LabelRegion] = opts.Region
	it := &cloudprovider.InstanceType{Name: e.Name, Labels: labels, Capacity: capacity, Allocatable: alloc, AttachLimits: attachLimits(e.Labels)}
	for _, z := range opts.Zones {
		it.Offerings = append(it.Offerings,
			cloudprovider.Offering{Zone: z, CapacityType: v1.CapacityTypeOnDemand, Price: onDemand, Available: true},
			cloudprovider.Offering{Zone: z, CapacityType: v1.CapacityTypeSpot, Price: SpotPrice(e.Name, z, onDemand), Available: true},
		)
	}
	return it, nil
}

// SpotPrice is the modelled spot price of an instance type in a zone.
func SpotPrice(instanceType, zone string, onDemand float64) float64 {
	h := fnv.New32a()
	h.Write([]byte(instanceType + "/" + zone))
	u := float64(h.Sum32()) / float64(math.MaxUint32+1)
	return round4(onDemand * (SpotMinFraction + SpotFractionSpan*u))
}

func round4(f float64) float64 { return math.Round(f*1e4) / 1e4 }
