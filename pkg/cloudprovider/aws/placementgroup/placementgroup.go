// Package placementgroup resolves an EC2NodeClass's placementGroupSelector
// to the one placement group every instance of the class launches into.
package placementgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"k8s.io/utils/clock"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/selector"
)

// Node labels of an instance in a placement group, Karpenter's.
const (
	LabelID        = awsv1.Group + "/placement-group-id"
	LabelPartition = awsv1.Group + "/placement-group-partition"
)

// DefaultTTL is how long a resolved group is reused.
const DefaultTTL = time.Minute

// Group is a resolved placement group.
type Group struct {
	ID   string
	Name string
	// Strategy is cluster, partition or spread.
	Strategy string
	// Partitions is the partition count of a partition group.
	Partitions int32
}

// EC2API is the part of the EC2 client the provider calls.
type EC2API interface {
	DescribePlacementGroups(ctx context.Context, in *ec2.DescribePlacementGroupsInput, optFns ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error)
}

// NotFoundError is a selector that names no placement group in the
// account and region: the user's to fix, so the condition says so.
type NotFoundError struct{ Selector string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("Placement group %q not found: spec.placementGroupSelector names no placement group in this account and region; create it (aws ec2 create-placement-group) or fix the selector", e.Selector)
}

// Reason is the PlacementGroupReady reason, Karpenter's.
func (e *NotFoundError) Reason() string { return "PlacementGroupNotFound" }

// Provider resolves placement groups. It is safe for concurrent use.
type Provider struct {
	ec2   EC2API
	cache *selector.Cache[*Group]
}

// NewProvider returns a provider over api; ttl <= 0 means DefaultTTL.
func NewProvider(api EC2API, clk clock.PassiveClock, ttl time.Duration) *Provider {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Provider{ec2: api, cache: &selector.Cache[*Group]{Clock: clk, TTL: ttl}}
}

// Get returns the class's placement group: nil, nil when it selects none.
// A group that does not exist, or is not available (being deleted), is a
// *NotFoundError.
func (p *Provider) Get(ctx context.Context, nc *awsv1.EC2NodeClass) (*Group, error) {
	sel := nc.Spec.PlacementGroupSelector
	if sel == nil {
		return nil, nil
	}
	key := selector.Hash(sel)
	if g, _, ok := p.cache.Get(key); ok {
		return g, nil
	}
	in := &ec2.DescribePlacementGroupsInput{}
	name := sel.ID
	if sel.ID != "" {
		in.GroupIds = []string{sel.ID}
	} else {
		in.GroupNames = []string{sel.Name}
		name = sel.Name
	}
	out, err := p.ec2.DescribePlacementGroups(ctx, in)
	if err != nil {
		// EC2 answers an unknown name or id with an error, not an empty list.
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "InvalidPlacementGroup.Unknown" || apiErr.ErrorCode() == "InvalidGroup.NotFound" || apiErr.ErrorCode() == "InvalidPlacementGroupId.Malformed") {
			return nil, &NotFoundError{Selector: name}
		}
		return nil, fmt.Errorf("describing placement group %q for EC2NodeClass %q: %w", name, nc.Name, err)
	}
	for _, g := range out.PlacementGroups {
		if g.State != ec2types.PlacementGroupStateAvailable {
			continue
		}
		group := &Group{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), Strategy: string(g.Strategy), Partitions: aws.ToInt32(g.PartitionCount)}
		p.cache.Set(key, group)
		return group, nil
	}
	return nil, &NotFoundError{Selector: name}
}
