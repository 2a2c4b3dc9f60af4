// Package garbagecollection terminates instances that no NodeClaim owns, such
// as those launched just before a controller crash lost the NodeClaim, and
// deletes NodeClaims whose instance the cloud no longer has.
package garbagecollection

import (
	"context"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Controller periodically compares the cloud's instances with NodeClaims.
type Controller struct {
	// Cluster reads the NodeClaims in place: a List deep-copied every one
	// of them on each pass, 1,600 in the scale run, every 30 s.
	Cluster *state.Cluster
	// Client deletes NodeClaims whose instance is gone.
	Client        client.Client
	CloudProvider cloudprovider.CloudProvider
	Clock         clock.WithTicker
	Interval      time.Duration
	// MinAge spares instances younger than this, whose NodeClaim may not
	// have its provider ID recorded yet.
	MinAge time.Duration
}

// Start implements manager.Runnable.
func (c *Controller) Start(ctx context.Context) error {
	t := c.Clock.NewTicker(c.Interval)
	defer t.Stop()
	for {
		if err := c.collect(ctx); err != nil {
			log.FromContext(ctx).Error(err, "garbage collection failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (c *Controller) NeedLeaderElection() bool { return true }

func (c *Controller) collect(ctx context.Context) error {
	instances, err := c.CloudProvider.List(ctx)
	if err != nil {
		return err
	}
	claims, err := c.Cluster.NodeClaims(ctx)
	if err != nil {
		return err
	}
	if err := c.collectClaims(ctx, instances, claims); err != nil {
		return err
	}
	owned := map[string]bool{}
	// launching are the NodeClaims whose launch is not recorded yet;
	// attempted, per NodePool, the earliest time one of them attempted it.
	launching := map[string]bool{}
	attempted := map[string]time.Time{}
	for _, nc := range claims {
		owned[nc.Status.ProviderID] = true
		if nc.Status.ProviderID != "" {
			continue
		}
		launching[nc.Name] = true
		if at, err := time.Parse(time.RFC3339, nc.Annotations[v1.AnnotationLaunchAttempted]); err == nil {
			pool := nc.Labels[v1.LabelNodePool]
			if first, ok := attempted[pool]; !ok || at.Before(first) {
				attempted[pool] = at
			}
		}
	}
	for _, inst := range instances {
		if owned[inst.Status.ProviderID] || c.Clock.Since(inst.CreationTimestamp.Time) < c.MinAge {
			continue
		}
		// An instance tagged with the name of a NodeClaim still recording
		// its launch is that launch's: the NodeClaim will adopt it. One
		// tagged with a NodeClaim that recorded another instance is a
		// second launch for it, and goes.
		if launching[inst.Name] {
			continue
		}
		// Nor does an untagged one that a launch still being recorded in
		// its pool may have started (its tag is slow, or its controller
		// stopped before tagging it): that NodeClaim adopts it.
		if at, ok := attempted[inst.Labels[v1.LabelNodePool]]; ok && inst.Name == "" && !inst.CreationTimestamp.Time.Before(at.Add(-cloudprovider.LaunchSlack)) {
			continue
		}
		if err := c.CloudProvider.Delete(ctx, inst); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
			return err
		}
		log.FromContext(ctx).Info("garbage collected instance without a nodeclaim", "provider-id", inst.Status.ProviderID)
	}
	return nil
}
