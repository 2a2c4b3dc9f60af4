package aws

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// resumed is the instance an earlier, unrecorded attempt of this launch
// started, or nil (see v1.AnnotationLaunchAttempted). Only NodeClaims that
// attempted before ask, so a first launch costs no extra call.
func (c *CloudProvider) resumed(ctx context.Context, nodeClaim *v1.NodeClaim, reqs requirements.Requirements) (*instance.Instance, error) {
	at, ok := nodeClaim.Annotations[v1.AnnotationLaunchAttempted]
	if !ok {
		return nil, nil
	}
	since, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return nil, fmt.Errorf("nodeclaim %s: annotation %s=%q is not an RFC 3339 time", nodeClaim.Name, v1.AnnotationLaunchAttempted, at)
	}
	// An instance another NodeClaim recorded is its own, tagged or not (its
	// tag may have failed, and this process may have restarted since it was
	// handed out): never adopted.
	var claims v1.NodeClaimList
	if err := c.opts.NodeClasses.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("nodeclaim %s: listing NodeClaims before resuming its launch: %w", nodeClaim.Name, err)
	}
	recorded := map[string]bool{}
	for _, other := range claims.Items {
		if other.Name != nodeClaim.Name && other.Status.ProviderID != "" {
			recorded[other.Status.ProviderID] = true
		}
	}
	inst, err := c.opts.Instances.Launched(ctx, nodeClaim.Name, nodeClaim.Labels[v1.LabelNodePool], since, func(i *instance.Instance) bool {
		return !recorded[i.ProviderID()] && reqs.Allows(corev1.LabelInstanceTypeStable, i.Type) && reqs.Allows(corev1.LabelTopologyZone, i.Zone) && reqs.Allows(v1.LabelCapacityType, i.CapacityType)
	})
	if awsclient.IsAccessDenied(err) {
		// Without ec2:DescribeInstances nothing can be looked for; the
		// pods need their node, and garbage collection (which needs the
		// same permission to work at all) ends a second instance.
		log.FromContext(ctx).Error(awsclient.ExplainPermission(err), "cannot look for an unrecorded earlier launch; launching", "NodeClaim", map[string]string{"name": nodeClaim.Name})
		return nil, nil
	}
	if err != nil || inst == nil {
		return nil, err
	}
	log.FromContext(ctx).Info("resuming an unrecorded launch with the instance it started", "instance", inst.ID,
		"NodeClaim", map[string]string{"name": nodeClaim.Name}, "attempted", at)
	return inst, nil
}
