package nodeclass

import (
	"context"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
)

// ProfileGCPeriod is how often unused instance profiles are collected
// (Karpenter's 30 minutes): a role change is rare, and IAM's limit of
// 1,000 profiles per account is far.
const ProfileGCPeriod = 30 * time.Minute

// ProfileCollector deletes the cluster's instance profiles outside keep
// (instanceprofile.Provider.GarbageCollect).
type ProfileCollector interface {
	GarbageCollect(ctx context.Context, keep map[string]bool) ([]string, error)
}

// ProfileGC collects the instance profiles Joiner (or Karpenter) created
// for this cluster that no class uses and no NodeClaim names: the profile
// of a role the class no longer has, once the nodes launched with it are
// gone.
type ProfileGC struct {
	Client   client.Client
	Profiles ProfileCollector
	Clock    clock.Clock
	// Period is how often to collect; ProfileGCPeriod when zero.
	Period time.Duration

	denied bool
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (g *ProfileGC) NeedLeaderElection() bool { return true }

// Start collects at once, then every period, until ctx ends.
func (g *ProfileGC) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("instanceprofile.garbagecollection"))
	if g.Clock == nil {
		g.Clock = clock.RealClock{}
	}
	period := g.period()
	for ctx.Err() == nil {
		if err := g.Collect(ctx); err != nil && ctx.Err() == nil && !g.denied {
			log.FromContext(ctx).Error(err, "collecting unused instance profiles")
		}
		select {
		case <-ctx.Done():
		case <-g.Clock.After(period):
		}
	}
	return nil
}

func (g *ProfileGC) period() time.Duration {
	if g.Period == 0 {
		return ProfileGCPeriod
	}
	return g.Period
}

// Collect deletes the unused profiles once. A refused listing (Karpenter's
// v1.1.3 stack does not grant iam:ListInstanceProfiles) is logged when it
// starts and when it ends.
func (g *ProfileGC) Collect(ctx context.Context) error {
	keep, err := g.inUse(ctx)
	if err != nil {
		return err
	}
	logger := log.FromContext(ctx)
	deleted, err := g.Profiles.GarbageCollect(ctx, keep)
	for _, name := range deleted {
		logger.Info("deleted instance profile", "instance-profile", name)
	}
	if awsclient.IsAccessDenied(err) {
		if !g.denied {
			logger.Info("unused instance profiles are not collected: allow iam:ListInstanceProfiles in the IAM policy of the role Joiner runs as (Karpenter's v1.14 stack does)",
				"retry", g.period().String())
		}
		g.denied = true
		return err
	}
	if g.denied && err == nil {
		logger.Info("unused instance profiles are collected: iam:ListInstanceProfiles is allowed")
		g.denied = false
	}
	return err
}

// inUse are the profiles the classes use now and the NodeClaims launched
// with.
func (g *ProfileGC) inUse(ctx context.Context) (map[string]bool, error) {
	keep := map[string]bool{}
	var classes awsv1.EC2NodeClassList
	if err := g.Client.List(ctx, &classes); err != nil {
		return nil, err
	}
	for _, nc := range classes.Items {
		if nc.Status.InstanceProfile != "" {
			keep[nc.Status.InstanceProfile] = true
		}
	}
	var claims v1.NodeClaimList
	if err := g.Client.List(ctx, &claims); err != nil {
		return nil, err
	}
	for _, nc := range claims.Items {
		if name := nc.Annotations[awsv1.AnnotationInstanceProfile]; name != "" {
			keep[name] = true
		}
	}
	return keep, nil
}
