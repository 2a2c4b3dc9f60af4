// Package securitygroup resolves an EC2NodeClass's securityGroupSelectorTerms.
package securitygroup

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/selector"
	"k8s.io/utils/clock"
)

// DefaultTTL is how long resolved security groups are reused.
const DefaultTTL = time.Minute

// EC2API is the part of the EC2 client the provider calls.
type EC2API interface {
	DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
}

// Provider resolves security groups. It is safe for concurrent use.
type Provider struct {
	ec2   EC2API
	cache *selector.Cache[[]awsv1.SecurityGroup]
}

// NewProvider returns a provider over api; ttl <= 0 means DefaultTTL.
func NewProvider(api EC2API, clk clock.PassiveClock, ttl time.Duration) *Provider {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Provider{ec2: api, cache: &selector.Cache[[]awsv1.SecurityGroup]{Clock: clk, TTL: ttl}}
}

// List returns the security groups nc selects, by id. A term selects by id,
// by group name (not the Name tag) or by tags. An empty selection is a
// *selector.NoMatchError naming every term; terms that match nothing while
// others match are not an error, since terms are ORed.
func (p *Provider) List(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.SecurityGroup, error) {
	key := selector.Hash(nc.Spec.SecurityGroupSelectorTerms)
	if cached, _, ok := p.cache.Get(key); ok {
		return append([]awsv1.SecurityGroup(nil), cached...), nil
	}
	byID := map[string]awsv1.SecurityGroup{}
	for _, term := range nc.Spec.SecurityGroupSelectorTerms {
		filters := selector.TagFilters(term.Tags)
		if term.ID != "" {
			filters = append(filters, selector.Filter("group-id", term.ID))
		}
		if term.Name != "" {
			filters = append(filters, selector.Filter("group-name", term.Name))
		}
		pages := ec2.NewDescribeSecurityGroupsPaginator(p.ec2, &ec2.DescribeSecurityGroupsInput{Filters: filters})
		for pages.HasMorePages() {
			out, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing security groups for EC2NodeClass %q: %w", nc.Name, err)
			}
			for _, g := range out.SecurityGroups {
				id := aws.ToString(g.GroupId)
				byID[id] = awsv1.SecurityGroup{ID: id, Name: aws.ToString(g.GroupName)}
			}
		}
	}
	if len(byID) == 0 {
		terms := make([]string, 0, len(nc.Spec.SecurityGroupSelectorTerms))
		for i, t := range nc.Spec.SecurityGroupSelectorTerms {
			terms = append(terms, selector.DescribeTerm("securityGroupSelectorTerms", i, t.ID, t.Name, t.Tags))
		}
		return nil, &selector.NoMatchError{ReasonCode: "SecurityGroupsNotFound", Summary: "SecurityGroupSelector did not match any SecurityGroups", Terms: terms}
	}
	groups := make([]awsv1.SecurityGroup, 0, len(byID))
	for _, g := range byID {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].ID < groups[j].ID })
	p.cache.Set(key, groups)
	return append([]awsv1.SecurityGroup(nil), groups...), nil
}
