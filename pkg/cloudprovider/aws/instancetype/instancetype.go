// Package instancetype turns EC2's description of its instance types into
// the cloudprovider.InstanceTypes an EC2NodeClass can launch: labels,
// capacity and allocatable as the kubelet will report them (Compute), and an
// offering per zone of the class's subnets and capacity type, priced and
// marked unavailable after EC2 ran out of capacity (List).
package instancetype

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/pricing"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/unavailable"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// EC2API is the part of EC2 the provider calls.
type EC2API interface {
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
}

// RefreshInterval is how long the instance types and their zones are kept
// before they are described again. EC2 adds types and zones a few times a
// year; an hour lets a new one in the same day at two paginated calls an hour.
const RefreshInterval = time.Hour

// RetryInterval is how long after a failed refresh the last good data is
// used before the next try, so an EC2 outage does not turn every List into
// a failing call.
const RetryInterval = time.Minute

// FailureBackoff is how long a failed description is answered from memory
// while there is no data at all. Every provisioning round and every
// disruption poll lists the types, so without it a refused
// ec2:DescribeInstanceTypes would cost a refused call per caller, several
// a second. Nothing launches until the types are known, so the wait is
// shorter than RetryInterval's: 15s bounds the calls to four a minute and
// the delay after the permission is granted to 15s, which is the pace
// tagging retries a refused ec2:CreateTags at.
const FailureBackoff = 15 * time.Second

// Options configure a Provider.
type Options struct {
	EC2 EC2API
	// Region labels the types (topology.kubernetes.io/region).
	Region string
	// Pricing prices the offerings; nil prices them from the catalog.
	Pricing *pricing.Provider
	// Unavailable holds the offerings out of capacity; nil: a new cache.
	Unavailable *unavailable.Cache
	// VMMemoryOverheadPercent (VM_MEMORY_OVERHEAD_PERCENT) and
	// ReservedENIs (RESERVED_ENIS) are the operator's settings.
	VMMemoryOverheadPercent float64
	ReservedENIs            int
	// PlacementGroup is a class's placement group (a zero Placement for
	// none); nil: no class has one. Types whose supported strategies lack
	// the group's are left out, as EC2 refuses to launch them there, and
	// offerings EC2 ran out of in the group are unavailable to it alone.
	PlacementGroup func(ctx context.Context, nc *awsv1.EC2NodeClass) (Placement, error)
	// Discovered is the memory registered nodes reported; nil: a new store.
	Discovered *Discovered
	Clock      clock.Clock
	Log        logr.Logger
}

// Provider lists instance types. Its methods are safe for concurrent use.
type Provider struct {
	opts Options

	fetchMu sync.Mutex // one DescribeInstanceTypes at a time
	mu      sync.RWMutex
	infos   []ec2types.InstanceTypeInfo
	zones   map[string][]string // instance type -> zones offering it, sorted
	// fetched is when the data was described; tried when it was last tried.
	fetched, tried time.Time
	// failed is the error of the last try, while there is no data.
	failed     error
	generation uint64
	cache      map[string][]*cloudprovider.InstanceType
}

// New returns a provider that describes EC2's instance types on first use.
func New(opts Options) *Provider {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Pricing == nil {
		opts.Pricing = pricing.New(pricing.Options{Region: opts.Region, Isolated: true, Clock: opts.Clock})
	}
	if opts.Unavailable == nil {
		opts.Unavailable = unavailable.New(opts.Clock, unavailable.DefaultTTL)
	}
	if opts.Discovered == nil {
		opts.Discovered = NewDiscovered(opts.Clock)
	}
	return &Provider{opts: opts, cache: map[string][]*cloudprovider.InstanceType{}}
}

// List returns every instance type the class can launch, sorted by name,
// each with an offering per capacity type it supports (spot, on-demand) in
// every zone that both offers it and has one of the class's subnets
// (status.subnets), priced, and available unless EC2 recently ran out of
// it. An offering with no price is left out: it cannot be ranked. Types
// with no offering at all are still listed, so that running nodes of them
// are understood.
//
// A type's memory is what its registered nodes reported under the class's
// images (Discovered), or else the estimate.
//
// The result is shared with other callers and must not be modified. It is
// recomputed only when the class's kubelet, block devices, instance store
// policy, AMI family, images or zones change, when EC2's data is described
// again, or when a price, an offering's availability or a discovered
// capacity moves.
func (p *Provider) List(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*cloudprovider.InstanceType, error) {
	if err := p.ensureFresh(ctx); err != nil {
		return nil, err
	}
	zones := classZones(nc)
	in := InputsFor(nc, p.opts.VMMemoryOverheadPercent, p.opts.ReservedENIs)
	var group Placement
	if p.opts.PlacementGroup != nil && nc.Spec.PlacementGroupSelector != nil {
		var err error
		if group, err = p.opts.PlacementGroup(ctx, nc); err != nil {
			return nil, err
		}
	}
	conntrack := nc.Spec.ConnectionTracking != nil

	p.mu.RLock()
	infos, typeZones, generation := p.infos, p.zones, p.generation
	p.mu.RUnlock()

	key := v1.SetHash(struct {
		Kubelet             *awsv1.KubeletConfiguration
		BlockDeviceMappings []*awsv1.BlockDeviceMapping
		InstanceStorePolicy *awsv1.InstanceStorePolicy
		AMIFamily           string
		Zones               []string
		Nested              bool
		NetworkInterfaces   []awsv1.NetworkInterface
		Group               Placement
		Conntrack           bool
	}{in.Kubelet, in.BlockDeviceMappings, in.InstanceStorePolicy, in.AMIFamily, zones, nestedVirtualization(nc), in.NetworkInterfaces, group, conntrack}) +
		"/" + strconv.FormatUint(generation, 10) +
		"/" + strconv.FormatUint(p.opts.Unavailable.SeqNum(), 10) +
		"/" + strconv.FormatUint(p.opts.Pricing.SeqNum(), 10) +
		"/" + strconv.FormatUint(p.opts.Discovered.SeqNum(), 10) +
		"/" + amisKey(nc.Status.AMIs)
	p.mu.RLock()
	cached, ok := p.cache[key]
	p.mu.RUnlock()
	if ok {
		return slices.Clone(cached), nil
	}

	out := make([]*cloudprovider.InstanceType, 0, len(infos))
	nested := nestedVirtualization(nc)
	for _, info := range infos {
		if nested && !SupportsNestedVirtualization(info) {
			continue
		}
		if !compatible(info, group.Strategy, conntrack) || !holdsInterfaces(info, nc.Spec.NetworkInterfaces) {
			continue
		}
		labels, capacity, allocatable, err := Compute(info, in)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
		}
		if labels[corev1.LabelOSStable] == "" || labels[corev1.LabelArchStable] == "" {
			continue // an architecture Kubernetes or the family cannot run
		}
		if memory, ok := p.opts.Discovered.Memory(string(info.InstanceType), nc.Status.AMIs); ok {
			capacity, allocatable = withDiscovered(capacity, allocatable, memory)
		}
		kubeReserved, err := KubeReserved(info, in)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
		}
		labels[corev1.LabelTopologyRegion] = p.opts.Region
		name := string(info.InstanceType)
		out = append(out, &cloudprovider.InstanceType{
			Name:         name,
			Labels:       labels,
			Capacity:     capacity,
			Allocatable:  allocatable,
			Offerings:    p.offerings(info, intersect(typeZones[name], zones), group.ID),
			AttachLimits: catalog.AttachLimits(labels),
			KubeReserved: kubeReserved,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })

	p.mu.Lock()
	if len(p.cache) >= 64 {
		// Keys of older generations and sequence numbers are never asked
		// again; dropping everything now and then bounds the memory.
		p.cache = map[string][]*cloudprovider.InstanceType{}
	}
	p.cache[key] = out
	p.mu.Unlock()
	return slices.Clone(out), nil
}

// ObserveMemory records the memory capacity a registered node of the type
// reported, booted from one of the class's current images, and reports
// whether the type's capacity changed.
func (p *Provider) ObserveMemory(instanceType string, nc *awsv1.EC2NodeClass, memory resource.Quantity) bool {
	return p.opts.Discovered.Observe(instanceType, nc.Status.AMIs, memory)
}

// Placement is a class's placement group: its ID and strategy.
type Placement struct{ ID, Strategy string }

// offerings are the type's in the zones, for launches into the placement
// group of that ID ("" for none).
func (p *Provider) offerings(info ec2types.InstanceTypeInfo, zones []string, group string) []cloudprovider.Offering {
	name := string(info.InstanceType)
	var out []cloudprovider.Offering
	for _, zone := range zones {
		for _, ct := range []string{v1.CapacityTypeOnDemand, v1.CapacityTypeSpot} {
			if !slices.Contains(info.SupportedUsageClasses, ec2types.UsageClassType(ct)) {
				continue
			}
			var price float64
			var ok bool
			if ct == v1.CapacityTypeSpot {
				price, ok = p.opts.Pricing.Spot(name, zone)
			} else {
				price, ok = p.opts.Pricing.OnDemand(name)
			}
			if !ok {
				continue
			}
			out = append(out, cloudprovider.Offering{
				Zone: zone, CapacityType: ct, Price: price,
				Available: !p.opts.Unavailable.IsUnavailableIn(group, name, zone, ct),
			})
		}
	}
	return out
}

// classZones are the zones of the class's resolved subnets, sorted.
func classZones(nc *awsv1.EC2NodeClass) []string {
	var zones []string
	for _, s := range nc.Status.Subnets {
		if s.Zone != "" && !slices.Contains(zones, s.Zone) {
			zones = append(zones, s.Zone)
		}
	}
	sort.Strings(zones)
	return zones
}

func intersect(sortedA, sortedB []string) []string {
	var out []string
	for _, z := range sortedA {
		if _, found := slices.BinarySearch(sortedB, z); found {
			out = append(out, z)
		}
	}
	return out
}

// ensureFresh describes the types when they are missing or older than
// RefreshInterval. A failure is an error only while there is no data, and
// the same error is answered without a call for FailureBackoff; once there
// is data, the last good data is used and the refresh retried after
// RetryInterval.
func (p *Provider) ensureFresh(ctx context.Context) error {
	if fresh, err := p.fresh(); fresh || err != nil {
		return err
	}
	p.fetchMu.Lock()
	defer p.fetchMu.Unlock()
	// Another caller may have refreshed, or failed to, meanwhile.
	if fresh, err := p.fresh(); fresh || err != nil {
		return err
	}
	now := p.opts.Clock.Now()
	err := p.Refresh(ctx)
	if err == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tried = now
	if p.infos == nil {
		// A caller's cancelled context says nothing about EC2: the next
		// caller tries for itself.
		p.failed = nil
		if ctx.Err() == nil {
			p.failed = err
		}
		return err
	}
	p.opts.Log.Error(err, "instance types not refreshed; using the last described ones", "describedAt", p.fetched)
	return nil
}

// fresh reports whether the data needs no description now; with no data,
// it answers instead the error of a try less than FailureBackoff ago.
func (p *Provider) fresh() (bool, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	now := p.opts.Clock.Now()
	if p.infos == nil {
		if p.failed != nil && now.Sub(p.tried) < FailureBackoff {
			return false, p.failed
		}
		return false, nil
	}
	return now.Sub(p.fetched) < RefreshInterval || now.Sub(p.tried) < RetryInterval, nil
}

// Refresh describes the region's instance types and the zones offering
// each, now.
func (p *Provider) Refresh(ctx context.Context) error {
	infos, err := p.describeTypes(ctx)
	if err != nil {
		return fmt.Errorf("describing instance types: %w", err)
	}
	zones, err := p.describeZones(ctx)
	if err != nil {
		return fmt.Errorf("describing instance type offerings: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.infos, p.zones, p.failed = infos, zones, nil
	p.fetched = p.opts.Clock.Now()
	p.generation++
	return nil
}

func (p *Provider) describeTypes(ctx context.Context) ([]ec2types.InstanceTypeInfo, error) {
	// No server-side filters: every type is described and the ones a node
	// cannot run (no HVM, no amd64 or arm64) are dropped here. The answer
	// is a few pages either way, and moto 5.2.1 matches such filters
	// against a type's first listed value only, which would lose t2.micro
	// ([i386, x86_64]) in tests though EC2 returns it.
	in := &ec2.DescribeInstanceTypesInput{}
	var infos []ec2types.InstanceTypeInfo
	pages := ec2.NewDescribeInstanceTypesPaginator(p.opts.EC2, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, info := range out.InstanceTypes {
			if usable(info) {
				infos = append(infos, info)
			}
		}
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("EC2 described no instance type in region %q", p.opts.Region)
	}
	return infos, nil
}

// usable reports whether nodes can run on the type (HVM; the architecture
// is checked by List) and the record has what Compute needs, which EC2
// always sends and a fake or a truncated answer may not.
func usable(info ec2types.InstanceTypeInfo) bool {
	return info.InstanceType != "" && slices.Contains(info.SupportedVirtualizationTypes, ec2types.VirtualizationTypeHvm) && info.VCpuInfo != nil && info.VCpuInfo.DefaultVCpus != nil &&
		info.MemoryInfo != nil && info.MemoryInfo.SizeInMiB != nil && info.NetworkInfo != nil && info.ProcessorInfo != nil
}

func (p *Provider) describeZones(ctx context.Context) (map[string][]string, error) {
	in := &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone}
	zones := map[string][]string{}
	pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.opts.EC2, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range out.InstanceTypeOfferings {
			it, zone := string(o.InstanceType), aws.ToString(o.Location)
			if it != "" && zone != "" && !slices.Contains(zones[it], zone) {
				zones[it] = append(zones[it], zone)
			}
		}
	}
	for _, z := range zones {
		sort.Strings(z)
	}
	return zones, nil
}

// nestedVirtualization is spec.cpuOptions.nestedVirtualization: enabled.
func nestedVirtualization(nc *awsv1.EC2NodeClass) bool {
	o := nc.Spec.CPUOptions
	return o != nil && o.NestedVirtualization != nil && *o.NestedVirtualization == "enabled"
}

// compatible reports a type EC2 can launch for the class, as Karpenter
// checks it: into its placement group's strategy (when it has one), and,
// with connectionTracking, on the Nitro hypervisor, which alone takes the
// conntrack settings.
func compatible(info ec2types.InstanceTypeInfo, strategy string, conntrack bool) bool {
	if strategy != "" && (info.PlacementGroupInfo == nil || !slices.Contains(info.PlacementGroupInfo.SupportedStrategies, ec2types.PlacementGroupStrategy(strategy))) {
		return false
	}
	return !conntrack || info.Hypervisor == ec2types.InstanceTypeHypervisorNitro
}

// holdsInterfaces reports a type that can take the class's listed
// interfaces (none listed: any): ENA, a card for each interface's card
// index, room for its device index on that card, and the EFAs its
// efa-only interfaces ask for, as Karpenter checks them; EC2 refuses the
// launch otherwise.
func holdsInterfaces(info ec2types.InstanceTypeInfo, nics []awsv1.NetworkInterface) bool {
	if nics == nil {
		return true
	}
	n := info.NetworkInfo
	if n == nil || len(n.NetworkCards) == 0 || n.EnaSupport == ec2types.EnaSupportUnsupported {
		return false
	}
	for _, nic := range nics {
		fits := false
		for _, card := range n.NetworkCards {
			if aws.ToInt32(card.NetworkCardIndex) == nic.NetworkCardIndex && nic.DeviceIndex < aws.ToInt32(card.MaximumNetworkInterfaces) {
				fits = true
			}
		}
		if !fits {
			return false
		}
	}
	if efas := efaOnly(nics, false); efas > 0 && (n.EfaInfo == nil || int32(efas) > aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces)) {
		return false
	}
	return true
}

// SupportsNestedVirtualization reports a type EC2 can launch with nested
// virtualization on: only those may serve a class that asks for it, or
// the launch would fail.
func SupportsNestedVirtualization(info ec2types.InstanceTypeInfo) bool {
	return info.ProcessorInfo != nil && slices.Contains(info.ProcessorInfo.SupportedFeatures, ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization)
}
