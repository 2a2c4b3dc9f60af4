package interruption

import (
	"context"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instancestatus"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/node/repair"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// StatusPeriod is how often EC2's status checks are read: EC2 refreshes
// them every minute.
const StatusPeriod = time.Minute

// DeniedRetry is how long the poller waits after EC2 refused the call
// (Karpenter's v1.1.3 stack does not grant ec2:DescribeInstanceStatus),
// so that a permission granted later is picked up without a restart and
// without a refusal every minute.
const DeniedRetry = 15 * time.Minute

// StatusPoller acts on EC2's status checks, as Karpenter's AWS provider
// does: an instance or system check that has failed for
// instancestatus.UnhealthyThreshold means the node is broken, and it is
// terminated forcefully (its deadline set to now, so PDBs and grace
// periods no longer hold it: its pods are not serving), within node
// repair's limit on unhealthy nodes per pool; a scheduled event (a
// reboot, stop or retirement) drains the node gracefully before AWS acts.
type StatusPoller struct {
	Client   client.Client
	EC2      instancestatus.EC2API
	Recorder record.EventRecorder
	Clock    clock.Clock
	// Period is how often to poll; StatusPeriod when zero.
	Period time.Duration
	// Policies judge the nodes that count against node repair's limit
	// besides the impaired ones; repair.EKSPolicies when nil.
	Policies []repair.Policy

	denied bool
	// seen holds the findings already counted in the metric, so that one
	// impairment counts once however many polls see it; a key the last
	// poll did not see is dropped, so the memory holds only what is
	// unhealthy now and a second impairment counts again.
	seen map[instancestatus.Key]bool
	// waiting holds the failed checks already logged as not yet due.
	waiting map[instancestatus.Key]bool
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (p *StatusPoller) NeedLeaderElection() bool { return true }

// Start polls until ctx ends.
func (p *StatusPoller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("interruption.instancestatus"))
	if p.Clock == nil {
		p.Clock = clock.RealClock{}
	}
	period := p.Period
	if period == 0 {
		period = StatusPeriod
	}
	for ctx.Err() == nil {
		wait := period
		if err := p.Poll(ctx); err != nil && ctx.Err() == nil {
			if p.denied {
				wait = DeniedRetry
			} else {
				log.FromContext(ctx).Error(err, "reading EC2 instance status")
			}
		}
		select {
		case <-ctx.Done():
		case <-p.Clock.After(wait):
		}
	}
	return nil
}

// Poll reads the status checks once and acts on what they find. A refusal
// is logged once, when it starts, and once when it ends.
func (p *StatusPoller) Poll(ctx context.Context) error {
	logger := log.FromContext(ctx)
	findings, err := instancestatus.Unhealthy(ctx, p.EC2)
	if err != nil {
		if awsclient.IsAccessDenied(err) {
			if !p.denied {
				logger.Info("instance status checks are off: the role Joiner runs as may not call ec2:DescribeInstanceStatus; grant it (Karpenter's v1.14 stack does) to have impaired instances replaced", "retry", DeniedRetry.String())
			}
			p.denied = true
		}
		return err
	}
	if p.denied {
		logger.Info("instance status checks are on: ec2:DescribeInstanceStatus is allowed")
		p.denied = false
	}
	now := p.Clock.Now()
	current := map[instancestatus.Key]bool{}
	for _, f := range findings {
		current[f.Key()] = true
	}
	for k := range p.seen {
		if !current[k] {
			delete(p.seen, k)
		}
	}
	for k := range p.waiting {
		if !current[k] {
			delete(p.waiting, k)
		}
	}
	if len(findings) == 0 {
		return nil
	}
	claims, err := claimsByInstance(ctx, p.Client)
	if err != nil {
		return err
	}
	if p.seen == nil {
		p.seen = map[instancestatus.Key]bool{}
		p.waiting = map[instancestatus.Key]bool{}
	}
	// Every broken instance counts against node repair's limit, whether
	// or not its kubelet has noticed yet, and whether or not its check
	// has failed long enough to act on.
	broken := map[string]bool{}
	for _, f := range findings {
		if nc, ok := claims[f.InstanceID]; ok && f.Category.Forceful() && nc.Status.NodeName != "" {
			broken[nc.Status.NodeName] = true
		}
	}
	acted := map[string]bool{}
	for _, f := range findings {
		nc, ok := claims[f.InstanceID]
		if !ok {
			continue
		}
		if !f.Due(now) {
			if !p.waiting[f.Key()] {
				p.waiting[f.Key()] = true
				logger.Info("instance status check failed; waiting for it to recover", "NodeClaim", map[string]string{"name": nc.Name},
					"instance", f.InstanceID, "category", string(f.Category), "status", f.Detail,
					"impairedSince", f.Since.UTC().Format(time.RFC3339), "threshold", instancestatus.UnhealthyThreshold.String())
			}
			continue
		}
		if !p.seen[f.Key()] {
			p.seen[f.Key()] = true
			metrics.InstanceStatusUnhealthy.WithLabelValues(string(f.Category)).Inc()
		}
		// Findings come most severe first: one action per instance.
		if acted[f.InstanceID] {
			continue
		}
		acted[f.InstanceID] = true
		if err := p.act(ctx, f, nc, broken); err != nil {
			return err
		}
	}
	return nil
}

func (p *StatusPoller) act(ctx context.Context, f instancestatus.Finding, nc *v1.NodeClaim, broken map[string]bool) error {
	logger := log.FromContext(ctx).WithValues("NodeClaim", map[string]string{"name": nc.Name}, "instance", f.InstanceID, "category", string(f.Category), "status", f.Detail)
	pool := nc.Labels[v1.LabelNodePool]
	if !f.Category.Forceful() {
		if nc.DeletionTimestamp != nil {
			return nil
		}
		p.Recorder.Event(nc, corev1.EventTypeWarning, "InstanceUnhealthy", "An unhealthy warning was triggered for the instance: "+f.Detail)
		logger.Info("initiating delete from instance status", "action", "CordonAndDrain")
		if err := p.Client.Delete(ctx, nc); err != nil {
			return client.IgnoreNotFound(err)
		}
		metrics.NodeClaimsDisrupted.WithLabelValues(string(f.Category), pool, nc.Labels[v1.LabelCapacityType]).Inc()
		return nil
	}
	if nc.DeletionTimestamp != nil && repair.Forced(nc, p.Clock.Now()) {
		return nil
	}
	policies := p.Policies
	if policies == nil {
		policies = repair.EKSPolicies
	}
	ok, msg, err := repair.FewUnhealthy(ctx, p.Client, pool, func(n *corev1.Node) bool {
		bad, _ := repair.Unhealthy(n, policies)
		return broken[n.Name] || bad != nil
	})
	if err != nil {
		return err
	}
	if !ok {
		logger.Info("node repair blocked", "reason", msg)
		p.Recorder.Event(nc, corev1.EventTypeWarning, "NodeRepairBlocked", msg)
		return nil
	}
	p.Recorder.Event(nc, corev1.EventTypeWarning, "InstanceUnhealthy", "EC2 status check failed for the instance: "+f.Detail)
	deleted, err := repair.Terminate(ctx, p.Client, nc, p.Clock.Now())
	if err != nil || !deleted {
		return err
	}
	logger.Info("deleting unhealthy instance", "action", "ForcefulTermination")
	metrics.NodeClaimsDisrupted.WithLabelValues(string(f.Category), pool, nc.Labels[v1.LabelCapacityType]).Inc()
	return nil
}
