package instance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/batcher"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

// Get describes one instance, batched with concurrent lookups. A terminated
// instance, or one EC2 does not know (yet), is a NotFoundError.
func (p *Provider) Get(ctx context.Context, id string) (*Instance, error) {
	return p.describe.Do(ctx, struct{}{}, id)
}

// Recent returns the instance as Get or List last described it, when that
// was at most maxAge ago, and otherwise describes it as Get does. It is for
// drift: an instance's subnet never changes and its security groups seldom
// do, while a NodeClaim's drift is checked on every update of it (its pods
// come and go), which would cost one DescribeInstances each. Garbage
// collection lists every instance each interval, so with maxAge above that
// interval the periodic checks cost no call either.
func (p *Provider) Recent(ctx context.Context, id string, maxAge time.Duration) (*Instance, error) {
	p.mu.Lock()
	s, ok := p.seen[id]
	p.mu.Unlock()
	if ok && p.clock.Since(s.at) <= maxAge {
		if s.inst.State == string(ec2types.InstanceStateNameTerminated) {
			return nil, &NotFoundError{ID: id, Terminated: true}
		}
		return s.inst, nil
	}
	return p.Get(ctx, id)
}

// remember records descriptions made at a time; with listed set, they are
// every live instance of the cluster, and older records of others (gone
// since) are dropped.
func (p *Provider) remember(at time.Time, insts []*Instance, listed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if listed {
		for id, s := range p.seen {
			if s.at.Before(at) {
				delete(p.seen, id)
			}
		}
	}
	for _, i := range insts {
		if cur, ok := p.seen[i.ID]; !ok || !cur.at.After(at) {
			p.seen[i.ID] = seenInstance{inst: i, at: at}
		}
	}
}

func (p *Provider) describeBatch(ctx context.Context, _ struct{}, ids []string) []batcher.Result[*Instance] {
	out := make([]batcher.Result[*Instance], len(ids))
	unique := uniq(ids)
	found := map[string]*Instance{}
	at := p.clock.Now()
	defer func() {
		insts := make([]*Instance, 0, len(found))
		for _, i := range found {
			insts = append(insts, i)
		}
		p.remember(at, insts, false)
	}()
	err := p.describeAll(ctx, &ec2.DescribeInstancesInput{InstanceIds: unique}, func(i *Instance) { found[i.ID] = i })
	if err != nil && isNotFoundCode(err) && len(unique) > 1 {
		// One unknown ID fails the whole call; ask one by one so the
		// others still get their answer.
		err = nil
		for _, id := range unique {
			if e := p.describeAll(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, func(i *Instance) { found[i.ID] = i }); e != nil && !isNotFoundCode(e) {
				err = e
			}
		}
	}
	for i, id := range ids {
		switch inst := found[id]; {
		case err != nil && !isNotFoundCode(err):
			out[i].Err = fmt.Errorf("describing instance %s: %w", id, err)
		case inst == nil:
			out[i].Err = &NotFoundError{ID: id}
		case inst.State == string(ec2types.InstanceStateNameTerminated):
			out[i].Err = &NotFoundError{ID: id, Terminated: true}
		default:
			out[i].Value = inst
		}
	}
	return out
}

func isNotFoundCode(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "InvalidInstanceID.NotFound" || api.ErrorCode() == "InvalidInstanceID.Malformed")
}

// List returns the cluster's instances that are not terminated.
func (p *Provider) List(ctx context.Context) ([]*Instance, error) {
	var out []*Instance
	at := p.clock.Now()
	err := p.describeAll(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		// Two tag-key filters are not ANDed everywhere (moto keeps one);
		// a tag:<key> filter and a tag-key filter are.
		{Name: aws.String("tag:" + p.ClusterTag()), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{tags.NodePool}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}}, func(i *Instance) { out = append(out, i) })
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	p.remember(at, out, true)
	return slices.DeleteFunc(out, p.settling), nil
}

func (p *Provider) describeAll(ctx context.Context, in *ec2.DescribeInstancesInput, each func(*Instance)) error {
	pager := ec2.NewDescribeInstancesPaginator(p.ec2, in)
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				each(fromEC2(i))
			}
		}
	}
	return nil
}

func fromEC2(i ec2types.Instance) *Instance {
	inst := &Instance{
		ID: aws.ToString(i.InstanceId), Type: string(i.InstanceType), ImageID: aws.ToString(i.ImageId),
		SubnetID: aws.ToString(i.SubnetId), PrivateDNS: aws.ToString(i.PrivateDnsName), LaunchTime: aws.ToTime(i.LaunchTime),
		CapacityType: CapacityTypeOnDemand, Tags: map[string]string{},
	}
	if i.Placement != nil {
		inst.Zone = aws.ToString(i.Placement.AvailabilityZone)
		inst.ZoneID = aws.ToString(i.Placement.AvailabilityZoneId)
		inst.PlacementGroupID = aws.ToString(i.Placement.GroupId)
		inst.PlacementPartition = aws.ToInt32(i.Placement.PartitionNumber)
	}
	if i.State != nil {
		inst.State = string(i.State.Name)
	}
	inst.CapacityReservationID = aws.ToString(i.CapacityReservationId)
	if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot || i.SpotInstanceRequestId != nil {
		inst.CapacityType = CapacityTypeSpot
	}
	for _, t := range i.Tags {
		inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, g := range i.SecurityGroups {
		inst.SecurityGroupIDs = append(inst.SecurityGroupIDs, aws.ToString(g.GroupId))
	}
	return inst
}

// Delete terminates the instance, batched with concurrent terminations. It
// returns a NotFoundError once the instance is gone, so the caller can tell
// "done" from "in progress".
func (p *Provider) Delete(ctx context.Context, id string) error {
	inst, err := p.Get(ctx, id)
	if err != nil {
		return err
	}
	if inst.State == string(ec2types.InstanceStateNameShuttingDown) {
		return nil
	}
	_, err = p.terminate.Do(ctx, struct{}{}, id)
	var gone *NotFoundError
	if err != nil && !errors.As(err, &gone) {
		metrics.InstanceTerminationFailures.WithLabelValues(inst.Zone, inst.ZoneID).Inc()
	}
	return err
}

// Terminate asks EC2 to terminate the instance, batched, without
// describing it first: for an instance so new that DescribeInstances may
// not show it yet (see the aws CloudProvider's Delete).
func (p *Provider) Terminate(ctx context.Context, id string) error {
	_, err := p.terminate.Do(ctx, struct{}{}, id)
	return err
}

func (p *Provider) terminateBatch(ctx context.Context, _ struct{}, ids []string) []batcher.Result[struct{}] {
	out := make([]batcher.Result[struct{}], len(ids))
	_, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: uniq(ids)})
	if err != nil && isNotFoundCode(err) && len(ids) > 1 {
		err = nil
		for _, id := range uniq(ids) {
			if _, e := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); e != nil && !isNotFoundCode(e) {
				err = e
			}
		}
	}
	for i, id := range ids {
		switch {
		case err != nil && isNotFoundCode(err):
			out[i].Err = &NotFoundError{ID: id}
		case err != nil:
			out[i].Err = fmt.Errorf("terminating instance %s: %w", id, err)
		}
	}
	return out
}

// Tag adds tags to the instance alone. Its volumes and interfaces got the
// launch template's tags when they were created; tagging them afterwards is
// what Karpenter's published controller policy refuses (after creation it
// allows ec2:CreateTags on instances only, and only the keys Name,
// karpenter.sh/nodeclaim and eks:eks-cluster-name), so a call naming them
// would fail whole, every retry.
func (p *Provider) Tag(ctx context.Context, inst *Instance, add map[string]string) error {
	_, err := p.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{inst.ID}, Tags: tags.EC2(add)})
	if err != nil {
		return fmt.Errorf("tagging instance %s: %w", inst.ID, err)
	}
	return nil
}
