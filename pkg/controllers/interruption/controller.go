// Package interruption drains nodes whose instances AWS is about to take:
// spot and capacity-reservation interruption warnings, scheduled
// maintenance and instances stopping or terminating, read from the SQS
// queue EventBridge feeds (INTERRUPTION_QUEUE). Draining within the
// two-minute spot warning moves pods off before the instance goes, instead
// of after. Beside the queue, StatusPoller reads EC2's status checks, which
// no EventBridge rule carries, and replaces instances that failed them.
package interruption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/interruption"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// SQSAPI is the part of SQS the controller calls.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Unavailable remembers offerings that were just taken back.
type Unavailable interface {
	MarkUnavailable(instanceType, zone, capacityType, reason string)
}

// Controller reads the queue and acts on each message.
type Controller struct {
	Client      client.Client
	SQS         SQSAPI
	Queue       string
	Unavailable Unavailable
	Recorder    record.EventRecorder
	Clock       clock.Clock
	// WaitTime is the long poll of one receive; default 20s, SQS's longest.
	WaitTime time.Duration

	queueURL string
}

// QueueURL resolves the queue, so a name that does not exist stops Joiner
// at start rather than leaving spot nodes undrained.
func (c *Controller) QueueURL(ctx context.Context) (string, error) {
	out, err := c.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(c.Queue)})
	if err != nil {
		var missing *sqstypes.QueueDoesNotExist
		if errors.As(err, &missing) || strings.Contains(err.Error(), "NonExistentQueue") {
			return "", fmt.Errorf("invalid setting INTERRUPTION_QUEUE (--interruption-queue) %q: no such SQS queue in this account and region; create it (the CloudFormation template does) or leave the setting empty to run without interruption handling", c.Queue)
		}
		return "", fmt.Errorf("finding the interruption queue %q: %w", c.Queue, awsclient.ExplainPermission(err))
	}
	c.queueURL = aws.ToString(out.QueueUrl)
	return c.queueURL, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one replica
// reads the queue.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start polls the queue until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("interruption")
	ctx = log.IntoContext(ctx, logger)
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.WaitTime == 0 {
		c.WaitTime = 20 * time.Second
	}
	backoff := time.Second
	for ctx.Err() == nil {
		if c.queueURL == "" {
			if _, err := c.QueueURL(ctx); err != nil {
				logger.Error(err, "interruption queue")
				c.sleep(ctx, backoff)
				backoff = min(2*backoff, time.Minute)
				continue
			}
		}
		if err := c.Poll(ctx); err != nil && ctx.Err() == nil {
			logger.Error(awsclient.ExplainPermission(err), "reading the interruption queue")
			c.sleep(ctx, backoff)
			backoff = min(2*backoff, time.Minute)
			continue
		}
		backoff = time.Second
	}
	return nil
}

func (c *Controller) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-c.Clock.After(d):
	}
}

// Poll receives one batch and handles its messages concurrently.
func (c *Controller) Poll(ctx context.Context) error {
	out, err := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(c.queueURL), MaxNumberOfMessages: 10,
		WaitTimeSeconds: int32(c.WaitTime / time.Second), VisibilityTimeout: 20,
	})
	if err != nil {
		return err
	}
	if len(out.Messages) == 0 {
		return nil
	}
	claims, err := claimsByInstance(ctx, c.Client)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(out.Messages))
	for i, msg := range out.Messages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.handle(ctx, msg, claims)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// claimsByInstance indexes the NodeClaims by the instance ID of their
// provider ID (aws:///<zone>/<id>); messages name instances only.
func claimsByInstance(ctx context.Context, kube client.Reader) (map[string]*v1.NodeClaim, error) {
	var list v1.NodeClaimList
	if err := kube.List(ctx, &list); err != nil {
		return nil, err
	}
	out := make(map[string]*v1.NodeClaim, len(list.Items))
	for i := range list.Items {
		nc := &list.Items[i]
		if id, err := instance.ParseProviderID(nc.Status.ProviderID); err == nil {
			out[id] = nc
		}
	}
	return out, nil
}

// handle acts on one message and deletes it. A message that cannot be
// parsed is deleted too: it would otherwise come back forever.
func (c *Controller) handle(ctx context.Context, msg sqstypes.Message, claims map[string]*v1.NodeClaim) error {
	logger := log.FromContext(ctx)
	m, err := interruption.Parse(aws.ToString(msg.Body))
	if err != nil {
		logger.Error(err, "dropping an unreadable interruption message", "message-id", aws.ToString(msg.MessageId))
		return c.delete(ctx, msg)
	}
	metrics.InterruptionReceived.WithLabelValues(string(m.Kind)).Inc()
	for _, id := range m.InstanceIDs {
		nc, ok := claims[id]
		if !ok {
			continue
		}
		if err := c.act(ctx, m, nc); err != nil {
			return err
		}
	}
	if !m.Time.IsZero() {
		metrics.InterruptionQueueDuration.Observe(c.Clock.Since(m.Time).Seconds())
	}
	return c.delete(ctx, msg)
}

// act records the message on the NodeClaim and its node and, when the
// message asks for it, deletes the NodeClaim: termination then taints,
// drains (respecting PDBs) and terminates, as for any deletion.
func (c *Controller) act(ctx context.Context, m interruption.Message, nc *v1.NodeClaim) error {
	reason, text := eventFor(m)
	c.Recorder.Event(nc, corev1.EventTypeWarning, reason, text)
	if nc.Status.NodeName != "" {
		node := &corev1.Node{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err == nil {
			c.Recorder.Event(node, corev1.EventTypeWarning, reason, text)
		}
	}
	if m.Action() != interruption.ActionDrain {
		return nil
	}
	if m.Kind == interruption.KindSpotInterruption && nc.Labels[v1.LabelCapacityType] == v1.CapacityTypeSpot {
		// The market just took this offering back: launching the
		// replacement into it would likely be interrupted again.
		c.Unavailable.MarkUnavailable(nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], v1.CapacityTypeSpot, "SpotInterruption")
	}
	if nc.DeletionTimestamp != nil {
		return nil
	}
	log.FromContext(ctx).Info("initiating delete from interruption message", "NodeClaim", nc.Name, "messageKind", string(m.Kind), "action", string(m.Action()))
	return client.IgnoreNotFound(c.Client.Delete(ctx, nc))
}

// eventFor is the event Karpenter records for each kind of message.
func eventFor(m interruption.Message) (reason, message string) {
	switch m.Kind {
	case interruption.KindSpotInterruption:
		return "SpotInterrupted", "Spot interruption warning was triggered"
	case interruption.KindRebalance:
		return "SpotRebalanceRecommendation", "Spot rebalance recommendation was triggered"
	case interruption.KindScheduledChange:
		return "InstanceUnhealthy", "An unhealthy warning was triggered for the instance"
	case interruption.KindCapacityReservation:
		return "CapacityReservationInterrupted", "Capacity reservation interruption warning was triggered"
	case interruption.KindStateChange:
		if m.State == "stopping" || m.State == "stopped" {
			return "InstanceStopping", "Instance is stopping"
		}
		return "InstanceTerminating", "Instance is terminating"
	}
	return "InterruptionMessage", string(m.Kind)
}

func (c *Controller) delete(ctx context.Context, msg sqstypes.Message) error {
	if _, err := c.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(c.queueURL), ReceiptHandle: msg.ReceiptHandle}); err != nil {
		return fmt.Errorf("deleting interruption message: %w", err)
	}
	metrics.InterruptionDeleted.Inc()
	return nil
}
