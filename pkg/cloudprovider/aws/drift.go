package aws

import (
	"context"
	"slices"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
	corev1 "k8s.io/api/core/v1"
)

// IsDrifted compares the instance with its class: the class's spec (by
// hash), its AMIs, subnets and security groups as last resolved.
func (c *CloudProvider) IsDrifted(ctx context.Context, nodeClaim *v1.NodeClaim) (string, error) {
	nc, err := c.nodeClassOf(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil || nc == nil {
		return "", err
	}
	if awsv1.HashDrifted(nc, nodeClaim) {
		return awsv1.ReasonNodeClassDrift, nil
	}
	// Status may be mid-resolution (empty while a selector is being
	// fixed); judging against it would drift the whole fleet.
	if !ready(nc) || nodeClaim.Status.ProviderID == "" {
		return "", nil
	}
	if c.opts.PlacementGroups != nil {
		pg, err := c.opts.PlacementGroups.Get(ctx, nc)
		if err != nil {
			return "", nil // not judged until it resolves, as for status
		}
		want := ""
		if pg != nil {
			want = pg.ID
		}
		if nodeClaim.Labels[placementgroup.LabelID] != want {
			return ReasonPlacementGroupDrift, nil
		}
	}
	if drifted, err := c.amiDrifted(ctx, nc, nodeClaim); err != nil || drifted {
		if drifted {
			return ReasonAMIDrift, nil
		}
		return "", err
	}
	id, err := instance.ParseProviderID(nodeClaim.Status.ProviderID)
	if err != nil {
		return "", nil
	}
	inst, err := c.opts.Instances.Recent(ctx, id, c.opts.DriftMaxAge)
	if err != nil {
		if instance.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	if inst.SubnetID != "" && len(nc.Status.Subnets) > 0 && !slices.ContainsFunc(nc.Status.Subnets, func(s awsv1.Subnet) bool { return s.ID == inst.SubnetID }) {
		return ReasonSubnetDrift, nil
	}
	if len(inst.SecurityGroupIDs) > 0 && len(nc.Status.SecurityGroups) > 0 {
		want := make([]string, 0, len(nc.Status.SecurityGroups))
		for _, sg := range nc.Status.SecurityGroups {
			want = append(want, sg.ID)
		}
		got := slices.Clone(inst.SecurityGroupIDs)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			return ReasonSecurityGroupDrift, nil
		}
	}
	return c.reservationDrift(ctx, nc, nodeClaim, inst)
}

// reservationDrift drifts a reserved node whose instance runs in a
// reservation the class no longer selects, as Karpenter does. A recent
// description that says so is confirmed by a fresh one: a reservation
// that ended has let its instances go (they run on demand, and the
// reservation controller relabels them), which an older description would
// not show. An on-demand node EC2 put into an open reservation is not
// reserved, and not judged.
func (c *CloudProvider) reservationDrift(ctx context.Context, nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim, inst *instance.Instance) (string, error) {
	selected := func(id string) bool {
		return slices.ContainsFunc(nc.Status.CapacityReservations, func(r awsv1.CapacityReservation) bool { return r.ID == id })
	}
	if nodeClaim.Labels[v1.LabelCapacityType] != v1.CapacityTypeReserved || inst.CapacityReservationID == "" || selected(inst.CapacityReservationID) {
		return "", nil
	}
	fresh, err := c.opts.Instances.Get(ctx, inst.ID)
	if err != nil {
		if instance.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	if fresh.CapacityReservationID != "" && !selected(fresh.CapacityReservationID) {
		return ReasonCapacityReservationDrift, nil
	}
	return "", nil
}

// amiDrifted reports whether the node runs an image the class no longer
// maps to its instance type. Another image of the class does not do: a GPU
// node that came up on the standard image before the class resolved its
// accelerated one is drifted. A type the class no longer lists is judged
// against every image of the class.
func (c *CloudProvider) amiDrifted(ctx context.Context, nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim) (bool, error) {
	image := nodeClaim.Status.ImageID
	if image == "" || len(nc.Status.AMIs) == 0 {
		return false, nil
	}
	// An image the class no longer has is drifted whatever the type, and
	// a class of one image maps it to every type it boots: only a class of
	// several needs the node's type to tell.
	n := 0
	for _, a := range nc.Status.AMIs {
		if a.ID == image {
			n++
		}
	}
	if n == 0 {
		return true, nil
	}
	if len(nc.Status.AMIs) == 1 {
		return false, nil
	}
	its, err := c.opts.InstanceTypes.List(ctx, nc)
	if err != nil {
		return false, err
	}
	var it *cloudprovider.InstanceType
	for _, t := range its {
		if t.Name == nodeClaim.Labels[corev1.LabelInstanceTypeStable] {
			it = t
		}
	}
	return !slices.ContainsFunc(nc.Status.AMIs, func(a awsv1.AMI) bool {
		return a.ID == image && (it == nil || amiFits(a, it))
	}), nil
}
