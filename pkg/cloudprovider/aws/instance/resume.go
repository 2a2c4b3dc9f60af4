package instance

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
)

// Launched finds the instance that an earlier attempt to launch for the
// NodeClaim named claim started, when that attempt's result was never
// recorded (the NodeClaim's write failed, or the controller stopped). It is
// asked before launching again, so that a retry at any point adopts what
// the attempt launched instead of launching a second machine:
//
//   - an instance tagged with the NodeClaim's name: the attempt got as far
//     as tagging it;
//   - failing that, an instance of the pool launched since the attempt
//     (since, less cloudprovider.LaunchSlack) that is tagged with no NodeClaim, that this
//     process did not hand to another NodeClaim, whose fleet call is not
//     still being settled, and that fits says the NodeClaim could run as:
//     the attempt stopped between the fleet call and the tag.
//
// It returns nil when there is none.
func (p *Provider) Launched(ctx context.Context, claim, nodePool string, since time.Time, fits func(*Instance) bool) (*Instance, error) {
	var found []*Instance
	err := p.describeAll(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + p.ClusterTag()), Values: []string{"owned"}},
		{Name: aws.String("tag:" + tags.NodePool), Values: []string{nodePool}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}}, func(i *Instance) { found = append(found, i) })
	if err != nil {
		return nil, fmt.Errorf("looking for the instance an earlier launch of nodeclaim %s started: %w", claim, err)
	}
	for _, i := range found {
		if i.Tags[tags.NodeClaim] == claim {
			return i, nil
		}
	}
	// The oldest first: the one the attempt most likely started.
	sort.Slice(found, func(a, b int) bool { return found[a].LaunchTime.Before(found[b].LaunchTime) })
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgetHanded()
	for _, i := range found {
		if i.Tags[tags.NodeClaim] != "" || i.LaunchTime.Before(since.Add(-cloudprovider.LaunchSlack)) {
			continue
		}
		if _, taken := p.handed[i.ID]; taken || p.settlingLocked(i) || !fits(i) {
			continue
		}
		p.handed[i.ID] = p.clock.Now()
		return i, nil
	}
	return nil, nil
}

// handedTTL is how long the IDs of instances handed to NodeClaims are
// remembered: past it, the instance carries its NodeClaim's tag (the
// tagging controller sees to it), which is what Launched goes by.
const handedTTL = time.Hour

// hand records instances given to NodeClaims, so that no resumed launch
// adopts one of them before its tag is on.
func (p *Provider) hand(insts []*Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for _, i := range insts {
		p.handed[i.ID] = now
	}
}

// forgetHanded drops records older than handedTTL; p.mu is held.
func (p *Provider) forgetHanded() {
	for id, at := range p.handed {
		if p.clock.Since(at) > handedTTL {
			delete(p.handed, id)
		}
	}
}
