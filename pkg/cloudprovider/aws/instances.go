package aws

import (
	"context"
	"sort"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/capacityreservation"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// tagForClaim names the instance after the
// NodeClaim once EC2 shows it, and reports whether it did. A failure does
// not fail the launch: the instance is already the NodeClaim's (its
// provider ID is recorded), and the tags are for people and cost reports;
// the tagging controller (TagNodeClaim) tries again later. A refused
// permission is not retried here: a person grants it, not a wait.
func (c *CloudProvider) tagForClaim(ctx context.Context, inst *instance.Instance, claim string) bool {
	deadline := c.opts.Clock.Now().Add(c.opts.TagRetry)
	wait := 200 * time.Millisecond
	for {
		described, err := c.tagOnce(ctx, inst.ID, claim)
		if err == nil {
			*inst = mergeDescribed(*inst, described)
			return true
		}
		if awsclient.IsAccessDenied(err) || !c.opts.Clock.Now().Add(wait).Before(deadline) {
			log.FromContext(ctx).Error(awsclient.ExplainPermission(err), "instance launched but not tagged with its nodeclaim; tagging it later", "instance", inst.ID, "NodeClaim", map[string]string{"name": claim})
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-c.opts.Clock.After(wait):
		}
		wait *= 2
	}
}

// TagNodeClaim tags the NodeClaim's instance as a launch does, for the
// tagging controller: the launch could not.
func (c *CloudProvider) TagNodeClaim(ctx context.Context, nodeClaim *v1.NodeClaim) (err error) {
	defer func() { err = awsclient.ExplainPermission(err) }()
	id, err := instance.ParseProviderID(nodeClaim.Status.ProviderID)
	if err != nil {
		return err
	}
	_, err = c.tagOnce(ctx, id, nodeClaim.Name)
	return err
}

// tagOnce describes the instance and adds the NodeClaim tag and, when it has
// none, a Name (the private DNS name). A Name the instance already has came
// from the class's tags: it is the user's, and stays, as in Karpenter.
func (c *CloudProvider) tagOnce(ctx context.Context, id, claim string) (*instance.Instance, error) {
	described, err := c.opts.Instances.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	add := map[string]string{}
	if described.Tags[tags.NodeClaim] != claim {
		add[tags.NodeClaim] = claim
	}
	if _, named := described.Tags[tags.Name]; !named {
		add[tags.Name] = described.PrivateDNS
		if add[tags.Name] == "" {
			add[tags.Name] = claim
		}
	}
	if len(add) == 0 {
		return described, nil
	}
	if err := c.opts.Instances.Tag(ctx, described, add); err != nil {
		return nil, err
	}
	return described, nil
}

func mergeDescribed(launched instance.Instance, described *instance.Instance) instance.Instance {
	out := *described
	if out.Zone == "" {
		out.Zone = launched.Zone
	}
	if out.CapacityType == "" {
		out.CapacityType = launched.CapacityType
	}
	return out
}

// Get returns the instance behind a provider ID.
func (c *CloudProvider) Get(ctx context.Context, providerID string) (_ *v1.NodeClaim, err error) {
	defer func() { err = awsclient.ExplainPermission(err) }()
	id, err := instance.ParseProviderID(providerID)
	if err != nil {
		return nil, err
	}
	inst, err := c.opts.Instances.Get(ctx, id)
	if err != nil {
		if instance.IsNotFound(err) {
			return nil, &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
		}
		return nil, err
	}
	return c.nodeClaimFor(inst), nil
}

// List returns the cluster's live instances.
func (c *CloudProvider) List(ctx context.Context) (_ []*v1.NodeClaim, err error) {
	defer func() { err = awsclient.ExplainPermission(err) }()
	insts, err := c.opts.Instances.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*v1.NodeClaim, 0, len(insts))
	for _, inst := range insts {
		if inst.State == "shutting-down" || inst.State == "terminated" {
			continue
		}
		out = append(out, c.nodeClaimFor(inst))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Status.ProviderID < out[j].Status.ProviderID })
	return out, nil
}

// nodeClaimFor describes an instance as a NodeClaim: its name is the
// NodeClaim tag (empty for an instance not yet tagged), and its age the
// launch time, which garbage collection's grace period is measured from.
func (c *CloudProvider) nodeClaimFor(inst *instance.Instance) *v1.NodeClaim {
	labels := map[string]string{
		corev1.LabelInstanceTypeStable: inst.Type,
		corev1.LabelTopologyZone:       inst.Zone,
		corev1.LabelTopologyRegion:     c.opts.Region,
		v1.LabelCapacityType:           inst.CapacityType,
	}
	if np := inst.Tags[tags.NodePool]; np != "" {
		labels[v1.LabelNodePool] = np
	}
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: inst.Tags[tags.NodeClaim], Labels: labels, CreationTimestamp: metav1.NewTime(inst.LaunchTime)},
		Status:     v1.NodeClaimStatus{ProviderID: inst.ProviderID(), ImageID: inst.ImageID},
	}
}

// Delete terminates the instance. It returns NodeClaimNotFoundError once
// the instance is gone. A NodeClaim without a provider ID never launched,
// or its launch was not recorded; garbage collection finds such instances.
func (c *CloudProvider) Delete(ctx context.Context, nodeClaim *v1.NodeClaim) (err error) {
	defer func() { err = awsclient.ExplainPermission(err) }()
	if nodeClaim.Status.ProviderID == "" {
		return &cloudprovider.NodeClaimNotFoundError{}
	}
	id, err := instance.ParseProviderID(nodeClaim.Status.ProviderID)
	if err != nil {
		return err
	}
	err = c.opts.Instances.Delete(ctx, id)
	if !instance.IsNotFound(err) {
		return err
	}
	// EC2's reads are eventually consistent: right after a launch,
	// DescribeInstances may not show the instance yet. Not found then is
	// not gone; it is terminated by ID, and asked about again later.
	// Described as terminated, it is gone.
	if launched := meta.FindStatusCondition(nodeClaim.Status.Conditions, v1.ConditionTypeLaunched); !instance.IsTerminated(err) && launched != nil &&
		launched.Status == metav1.ConditionTrue && c.opts.Clock.Since(launched.LastTransitionTime.Time) < DescribeLag {
		if err := c.opts.Instances.Terminate(ctx, id); err != nil && !instance.IsNotFound(err) {
			return err
		}
		return nil
	}
	// The instance is gone: its reservation has its room back now, not at
	// the next refresh, so a pod pending for it gets a reserved node.
	if r := nodeClaim.Labels[capacityreservation.LabelID]; r != "" && nodeClaim.Labels[v1.LabelCapacityType] == v1.CapacityTypeReserved && c.opts.CapacityReservations != nil {
		c.opts.CapacityReservations.Returned(r)
	}
	return &cloudprovider.NodeClaimNotFoundError{ProviderID: nodeClaim.Status.ProviderID}
}

// DescribeLag is how long after a launch Delete does not take "not found"
// for an answer. EC2 documents its reads as eventually consistent; a new
// instance shows within seconds, rarely a minute.
const DescribeLag = 2 * time.Minute

// InstanceReservation is the capacity reservation the instance of
// providerID runs in now ("" for none), from a fresh description; found is
// false while EC2 does not know the instance.
func (c *CloudProvider) InstanceReservation(ctx context.Context, providerID string) (string, bool, error) {
	id, err := instance.ParseProviderID(providerID)
	if err != nil {
		return "", false, err
	}
	inst, err := c.opts.Instances.Get(ctx, id)
	if err != nil {
		if instance.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, err
	}
	return inst.CapacityReservationID, true, nil
}
