// Package subnet resolves an EC2NodeClass's subnetSelectorTerms and picks
// the subnet each launch uses in a zone.
package subnet

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/selector"
	"k8s.io/utils/clock"
)

// DefaultTTL is how long resolved subnets are reused. Short, because the
// free-IP counts launches choose by change with every launch; long enough
// that a burst of launches describes the subnets once.
const DefaultTTL = time.Minute

// EC2API is the part of the EC2 client the provider calls.
type EC2API interface {
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
}

// Provider resolves subnets. It is safe for concurrent use.
type Provider struct {
	ec2   EC2API
	clock clock.Clock
	cache *selector.Cache[[]ec2types.Subnet]

	mu       sync.Mutex
	inflight []taken
}

// taken records IPs that a launch took from a subnet at a time, which the
// subnet's AvailableIpAddressCount, described before then, does not show.
type taken struct {
	subnet string
	ips    int
	at     time.Time
}

// NewProvider returns a provider over api; ttl <= 0 means DefaultTTL.
func NewProvider(api EC2API, clk clock.Clock, ttl time.Duration) *Provider {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Provider{ec2: api, clock: clk, cache: &selector.Cache[[]ec2types.Subnet]{Clock: clk, TTL: ttl}}
}

// List returns the subnets nc selects, most free IPs first, then by id. A
// selection that is empty is a *selector.NoMatchError naming every term.
// Terms that match nothing while others match are not an error: terms are
// ORed, and a subnet that is gone must not stop launches in the others.
func (p *Provider) List(ctx context.Context, nc *awsv1.EC2NodeClass) ([]ec2types.Subnet, error) {
	subnets, _, err := p.list(ctx, nc)
	return subnets, err
}

func (p *Provider) list(ctx context.Context, nc *awsv1.EC2NodeClass) ([]ec2types.Subnet, time.Time, error) {
	key := selector.Hash(nc.Spec.SubnetSelectorTerms)
	if cached, at, ok := p.cache.Get(key); ok {
		return append([]ec2types.Subnet(nil), cached...), at, nil
	}
	byID := map[string]ec2types.Subnet{}
	for _, term := range nc.Spec.SubnetSelectorTerms {
		filters := selector.TagFilters(term.Tags)
		if term.ID != "" {
			filters = append(filters, selector.Filter("subnet-id", term.ID))
		}
		pages := ec2.NewDescribeSubnetsPaginator(p.ec2, &ec2.DescribeSubnetsInput{Filters: filters})
		for pages.HasMorePages() {
			out, err := pages.NextPage(ctx)
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("describing subnets for EC2NodeClass %q: %w", nc.Name, err)
			}
			for _, s := range out.Subnets {
				byID[aws.ToString(s.SubnetId)] = s
			}
		}
	}
	if len(byID) == 0 {
		return nil, time.Time{}, noMatch(nc)
	}
	subnets := make([]ec2types.Subnet, 0, len(byID))
	for _, s := range byID {
		subnets = append(subnets, s)
	}
	sortByFreeIPs(subnets)
	at := p.cache.Set(key, subnets)
	return append([]ec2types.Subnet(nil), subnets...), at, nil
}

func noMatch(nc *awsv1.EC2NodeClass) error {
	terms := make([]string, 0, len(nc.Spec.SubnetSelectorTerms))
	for i, t := range nc.Spec.SubnetSelectorTerms {
		terms = append(terms, selector.DescribeTerm("subnetSelectorTerms", i, t.ID, "", t.Tags))
	}
	return &selector.NoMatchError{ReasonCode: "SubnetsNotFound", Summary: "SubnetSelector did not match any Subnets", Terms: terms}
}

// ZonalForLaunch picks, for each of zones (every zone of the selection when
// zones is empty), the subnet with the most free IPs, counting the IPs that
// launches reported through UpdateInflightIPs since the subnets were last
// described, so back-to-back launches spread over a zone's subnets. Subnets
// without a free IP are skipped. It fails only when no zone has a subnet.
func (p *Provider) ZonalForLaunch(ctx context.Context, nc *awsv1.EC2NodeClass, zones []string) (map[string]ec2types.Subnet, error) {
	subnets, at, err := p.list(ctx, nc)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, z := range zones {
		want[z] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	best := map[string]ec2types.Subnet{}
	bestFree := map[string]int{}
	for _, s := range subnets {
		zone := aws.ToString(s.AvailabilityZone)
		if len(zones) > 0 && !want[zone] {
			continue
		}
		if aws.ToInt32(s.AvailableIpAddressCount) <= 0 {
			continue
		}
		free := int(aws.ToInt32(s.AvailableIpAddressCount)) - p.takenLocked(aws.ToString(s.SubnetId), at)
		cur, ok := best[zone]
		if !ok || free > bestFree[zone] || (free == bestFree[zone] && aws.ToString(s.SubnetId) < aws.ToString(cur.SubnetId)) {
			best[zone], bestFree[zone] = s, free
		}
	}
	if len(best) == 0 {
		return nil, fmt.Errorf("EC2NodeClass %q has no subnet with free IPs in zones %v; add subnets in those zones to subnetSelectorTerms", nc.Name, zones)
	}
	return best, nil
}

// UpdateInflightIPs records the IPs launches just took, by subnet id (the
// instance code calls it after CreateFleet with, for example, one per
// instance launched). The count lowers the subnet's free IPs for
// ZonalForLaunch until the subnets are described again.
func (p *Provider) UpdateInflightIPs(ips map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	// Records older than the cache TTL predate every cached description,
	// which already counts them.
	kept := p.inflight[:0]
	for _, t := range p.inflight {
		if now.Sub(t.at) < p.cache.TTL {
			kept = append(kept, t)
		}
	}
	p.inflight = kept
	for subnet, n := range ips {
		if n > 0 {
			p.inflight = append(p.inflight, taken{subnet: subnet, ips: n, at: now})
		}
	}
}

func (p *Provider) takenLocked(subnet string, since time.Time) int {
	n := 0
	for _, t := range p.inflight {
		if t.subnet == subnet && !t.at.Before(since) {
			n += t.ips
		}
	}
	return n
}

// ToStatus is the subnets as status.subnets lists them: most free IPs
// first, then by id, which is the order launches prefer.
func ToStatus(subnets []ec2types.Subnet) []awsv1.Subnet {
	sorted := append([]ec2types.Subnet(nil), subnets...)
	sortByFreeIPs(sorted)
	out := make([]awsv1.Subnet, 0, len(sorted))
	for _, s := range sorted {
		out = append(out, awsv1.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId)})
	}
	return out
}

func sortByFreeIPs(subnets []ec2types.Subnet) {
	sort.SliceStable(subnets, func(i, j int) bool {
		a, b := aws.ToInt32(subnets[i].AvailableIpAddressCount), aws.ToInt32(subnets[j].AvailableIpAddressCount)
		if a != b {
			return a > b
		}
		return aws.ToString(subnets[i].SubnetId) < aws.ToString(subnets[j].SubnetId)
	})
}
