package aws

import (
	"context"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
)

// markOut takes out the offerings EC2 had no capacity for. A launch into
// the class's placement group takes them out for that group alone, as
// Karpenter does: a cluster group's full rack says nothing of the type
// elsewhere. A spread group's seven instances in a zone take every type of
// the launch out of that zone for the group.
func (c *CloudProvider) markOut(ctx context.Context, nc *awsv1.EC2NodeClass, its []*cloudprovider.InstanceType, out []instance.Offering) {
	if len(out) == 0 {
		return
	}
	group := ""
	if nc.Spec.PlacementGroupSelector != nil && c.opts.PlacementGroups != nil {
		if g, err := c.opts.PlacementGroups.Get(ctx, nc); err == nil && g != nil {
			group = g.ID
		}
	}
	for _, o := range out {
		if o.SpreadLimit && group != "" {
			for _, it := range its {
				c.opts.Unavailable.MarkUnavailableIn(group, it.Name, o.Zone, o.CapacityType, "SpreadPlacementGroupLimit")
			}
			continue
		}
		c.opts.Unavailable.MarkUnavailableIn(group, o.InstanceType, o.Zone, o.CapacityType, "InsufficientInstanceCapacity")
	}
}
