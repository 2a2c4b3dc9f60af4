package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/buffers"
	"github.com/joiner-autoscaler/joiner/pkg/explain"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/overlay"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Provisioner creates NodeClaims for pending pods, one batch at a time. It
// runs only on the leader.
type Provisioner struct {
	Client   client.Client
	Cluster  *state.Cluster
	Batcher  *Batcher
	Recorder record.EventRecorder
	Clock    clock.WithTicker
	// Resync re-runs a batch this often while pods are pending, so pods
	// whose NodeClaim failed to launch are planned again.
	Resync time.Duration
	// Scheduling carries the operator's scheduling settings to every plan.
	Scheduling scheduling.Options
	// Nominations record the NodeClaims and nodes each batch launched or
	// chose for pending pods, which disruption then leaves alone.
	Nominations *state.Nominations
	// Buffers, with the CapacityBuffer gate, hears where each plan put the
	// buffers' virtual pods, for their Provisioning condition.
	Buffers interface {
		Provisioned(ctx context.Context, tallies map[string]*buffers.Tally) error
	}
	// Board, when set, gets each batch's pods left pending and why, for
	// `joiner explain pod` (served on the metrics port).
	Board *explain.Board
}

// CreateWorkers is how many NodeClaims a batch creates at once. One at a
// time, a batch of 200 waits for 200 API round trips in a row, and its
// launches reach the cloud provider one by one, too far apart for the
// provider to batch them (one fleet request each on AWS); together, they
// arrive as one burst.
const CreateWorkers = 32

// Start implements manager.Runnable.
func (p *Provisioner) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("provisioner")
	ctx = log.IntoContext(ctx, logger)
	if p.Resync > 0 {
		go func() {
			t := p.Clock.NewTicker(p.Resync)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C():
					p.Batcher.Trigger()
				}
			}
		}()
	}
	for p.Batcher.Wait(ctx) {
		// A batch cut short by shutdown did not fail.
		if err := p.Reconcile(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "provisioning failed")
		}
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (p *Provisioner) NeedLeaderElection() bool { return true }

// Reconcile plans the pending pods and creates the plan's NodeClaims.
func (p *Provisioner) Reconcile(ctx context.Context) error {
	logger := log.FromContext(ctx)
	start := p.Clock.Now()
	// Held until the NodeClaims are created: disruption then plans on a
	// state that has them.
	done, err := p.Cluster.Plan(ctx)
	if err != nil {
		return err
	}
	defer done()
	pending, err := p.Cluster.Pending(ctx)
	if err != nil {
		return err
	}
	if len(pending) == 0 {
		return nil
	}
	snap, problems, err := p.Cluster.Snapshot(ctx, pending)
	if err != nil {
		return err
	}
	// Without those kube-scheduler bound meanwhile.
	pending = snap.Pods
	if len(pending) == 0 {
		return nil
	}
	for _, pr := range problems {
		var awaiting *overlay.AwaitingEvaluationError
		if errors.As(pr.Err, &awaiting) {
			logger.V(1).Info("skipping, awaiting nodeoverlay evaluation", "NodePool", map[string]string{"name": pr.NodePool})
			continue
		}
		if pr.Err != nil {
			logger.Error(pr.Err, "skipping nodepool, unable to resolve instance types", "NodePool", map[string]string{"name": pr.NodePool})
			continue
		}
		logger.V(1).Info("ignoring nodepool, not ready", "NodePool", map[string]string{"name": pr.NodePool}, "reason", pr.Reason)
	}
	// Pods the last batches already planned onto in-flight NodeClaims are not news.
	solveStart := p.Clock.Now()
	plan := scheduling.Solve(snap, p.Scheduling)
	solved := p.Clock.Since(solveStart).Seconds()
	metrics.SchedulingDuration.Observe(solved)
	metrics.AllocationBinpacking.Observe(solved)
	metrics.UnschedulablePods.Set(float64(len(plan.Unschedulable)))
	newPods := len(pending) - len(plan.Existing)
	if newPods > 0 || len(plan.Unschedulable) > 0 {
		logger.Info("found provisionable pod(s)", "Pods", podList(pending), "duration", p.Clock.Since(start).String())
	}
	if len(plan.NewNodeClaims) > 0 {
		logger.Info("computed new nodeclaim(s) to fit pod(s)", "nodeclaims", len(plan.NewNodeClaims), "pods", newPods-len(plan.Unschedulable))
	}
	var left []explain.Pod
	defer func() {
		if p.Board != nil {
			p.Board.RecordPods(p.Clock.Now(), left)
		}
	}()
	for _, u := range plan.Unschedulable {
		if buffers.IsVirtual(u.Pod) {
			continue // no pod to tell: the buffer's condition says it
		}
		reason := u.Reason
		if reason == scheduling.ErrResourceClaims.Error() {
			// Not a failure to fix but a pod left alone, as Karpenter logs it.
			logger.Info("skipping pod with Dynamic Resource Allocation requirements, not yet supported by Karpenter", "Pod", map[string]string{"namespace": u.Pod.Namespace, "name": u.Pod.Name})
			p.Recorder.Event(u.Pod, corev1.EventTypeWarning, "FailedScheduling", "Failed to schedule pod, "+reason)
			continue
		}
		if len(problems) > 0 {
			var parts []string
			for _, pr := range problems {
				parts = append(parts, fmt.Sprintf("nodepool %q: %s", pr.NodePool, pr.Reason))
			}
			reason += "; not ready: " + strings.Join(parts, "; ")
		}
		left = append(left, explain.Pod{Pod: u.Pod.Namespace + "/" + u.Pod.Name, Reason: reason, Pools: u.Pools})
		p.Recorder.Event(u.Pod, corev1.EventTypeWarning, "FailedScheduling", "Failed to schedule pod, "+reason)
	}
	if len(snap.NodePools) == 0 && len(problems) > 0 {
		for _, pod := range pending {
			if _, ok := plan.Existing[pod.Namespace+"/"+pod.Name]; !ok && len(plan.Unschedulable) == 0 {
				p.Recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", "Failed to schedule pod, no NodePool is ready: "+problems[0].Reason)
			}
		}
	}
	pools := map[string]*v1.NodePool{}
	for _, np := range snap.NodePools {
		pools[np.NodePool.Name] = np.NodePool
	}
	// Create every NodeClaim before telling pods about them: launches start
	// sooner, and a thousand events wait for no NodeClaim.
	created := make([]*v1.NodeClaim, len(plan.NewNodeClaims))
	workqueue.ParallelizeUntil(ctx, CreateWorkers, len(plan.NewNodeClaims), func(i int) {
		nc := plan.NewNodeClaims[i]
		c, err := p.create(ctx, pools[nc.NodePool], nc)
		if err != nil {
			logger.Error(err, "creating nodeclaim", "NodePool", map[string]string{"name": nc.NodePool})
			return
		}
		created[i] = c
	})
	observed := map[string]bool{}
	for i, nc := range plan.NewNodeClaims {
		if created[i] == nil {
			continue
		}
		if !observed[nc.NodePool] {
			observed[nc.NodePool] = true
			metrics.AllocationScheduling.WithLabelValues(nc.NodePool).Observe(p.Clock.Since(start).Seconds())
		}
		// Virtual pods nominate nothing: re-planned every batch, they
		// would hold their nodes from drift and expiry for good.
		waiting := realPods(nc.Pods)
		p.Nominations.NominateNodeClaim(created[i].Name, waiting...)
		for _, pod := range waiting {
			p.Recorder.Eventf(pod, corev1.EventTypeNormal, "Nominated", "Pod should schedule on: nodeclaim/%s", created[i].Name)
		}
	}
	p.nominateExisting(ctx, realPods(pending), plan.Existing)
	if p.Buffers != nil {
		if err := p.Buffers.Provisioned(ctx, buffers.Tallies(plan, pending)); err != nil {
			logger.Error(err, "updating CapacityBuffer provisioning status")
		}
	}
	return nil
}

// realPods leaves out the buffers' virtual pods.
func realPods(in []*corev1.Pod) []*corev1.Pod {
	out := in[:0:0]
	for _, p := range in {
		if !buffers.IsVirtual(p) {
			out = append(out, p)
		}
	}
	return out
}

// nominateExisting records the existing nodes and in-flight NodeClaims the
// plan counts on for pending pods. Every batch while the pods wait renews
// it, so a node launched for them stays protected until they bind. Each
// pod is told where it should go, in Karpenter's Nominated event
// ("nodeclaim/NAME, node/NAME"); the recorder says it once per window.
func (p *Provisioner) nominateExisting(ctx context.Context, pending []*corev1.Pod, existing map[string]string) {
	if p.Nominations == nil || len(existing) == 0 {
		return
	}
	byNode := map[string][]*corev1.Pod{}
	for _, pod := range pending {
		if node, ok := existing[pod.Namespace+"/"+pod.Name]; ok {
			byNode[node] = append(byNode[node], pod)
		}
	}
	claimOf := map[string]string{}
	if claims, err := p.Cluster.NodeClaims(ctx); err == nil {
		for _, nc := range claims {
			if nc.Status.NodeName != "" {
				claimOf[nc.Status.NodeName] = nc.Name
			}
		}
	}
	for node, pods := range byNode {
		p.Nominations.NominateSnapshotNode(node, pods...)
		where := "node/" + node
		if claim, ok := state.InFlightClaim(node); ok {
			where = "nodeclaim/" + claim
		} else if claim, ok := claimOf[node]; ok {
			where = "nodeclaim/" + claim + ", node/" + node
		}
		for _, pod := range pods {
			p.Recorder.Event(pod, corev1.EventTypeNormal, "Nominated", "Pod should schedule on: "+where)
		}
	}
}

func (p *Provisioner) create(ctx context.Context, np *v1.NodePool, planned *scheduling.NewNodeClaim) (*v1.NodeClaim, error) {
	nc, err := NewNodeClaim(np, planned, p.Client.Scheme())
	if err != nil {
		return nil, err
	}
	if err := p.Client.Create(ctx, nc); err != nil {
		return nil, err
	}
	// The next batch may list NodeClaims before the cache has this one.
	p.Cluster.Remember(ctx, nc)
	metrics.NodeClaimsCreated.WithLabelValues("provisioned", np.Name).Inc()
	var names []string
	for _, it := range planned.InstanceTypes {
		names = append(names, it.Name)
	}
	log.FromContext(ctx).Info("created nodeclaim",
		"NodePool", map[string]string{"name": np.Name},
		"NodeClaim", map[string]string{"name": nc.Name},
		"requests", planned.Requests.ResourceList(),
		"instance-types", FirstN(names, 5))
	return nc, nil
}

// NewNodeClaim builds the NodeClaim for a planned node of a NodePool, as
// Karpenter does: the template's labels and annotations plus the NodePool
// and NodeClass labels, the hash and min-values-relaxed annotations, custom labels the pods asked
// for through requirements, an owner reference to the NodePool that blocks
// its deletion, and the termination finalizer. Provisioning and disruption
// replacements both create NodeClaims this way.
func NewNodeClaim(np *v1.NodePool, planned *scheduling.NewNodeClaim, scheme *runtime.Scheme) (*v1.NodeClaim, error) {
	t := np.Spec.Template
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	labels[v1.LabelNodePool] = np.Name
	ref := t.Spec.NodeClassRef
	labels[ref.Group+"/"+strings.ToLower(ref.Kind)] = ref.Name
	for k, r := range planned.Requirements {
		if _, known := labels[k]; known || strings.Contains(k, "kubernetes.io/") || strings.HasPrefix(k, v1.Group) || strings.HasPrefix(k, awsv1.Group) {
			continue
		}
		if v, ok := r.Any(); ok && len(r.Values()) == 1 {
			labels[k] = v
		}
	}
	annotations := map[string]string{}
	for k, v := range t.Annotations {
		annotations[k] = v
	}
	annotations[v1.AnnotationNodePoolHash] = np.Hash()
	annotations[v1.AnnotationNodePoolHashVersion] = v1.NodePoolHashVersion
	// Karpenter stamps every NodeClaim it plans, relaxed or not.
	annotations[v1.AnnotationNodeClaimMinValuesRelaxed] = strconv.FormatBool(planned.MinValuesRelaxed)
	for _, it := range planned.InstanceTypes {
		if it.PriceOverlaid {
			annotations[v1.AnnotationPriceOverlayApplied] = "true"
		}
		if it.CapacityOverlaid {
			annotations[v1.AnnotationCapacityOverlayApplied] = "true"
		}
	}
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: np.Name + "-", Labels: labels, Annotations: annotations},
		Spec: v1.NodeClaimSpec{
			Taints: t.Spec.Taints, StartupTaints: t.Spec.StartupTaints,
			Requirements:           planned.Requirements.NodeSelectorRequirements(),
			Resources:              v1.ResourceRequirements{Requests: planned.Requests.ResourceList()},
			NodeClassRef:           ref,
			TerminationGracePeriod: t.Spec.TerminationGracePeriod,
			ExpireAfter:            t.Spec.ExpireAfter,
		},
	}
	controllerutil.AddFinalizer(nc, v1.TerminationFinalizer)
	if err := controllerutil.SetOwnerReference(np, nc, scheme, controllerutil.WithBlockOwnerDeletion(true)); err != nil {
		return nil, err
	}
	return nc, nil
}

// FirstN lists up to n names and counts the rest, as Karpenter logs them.
func FirstN(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d other(s)", strings.Join(names[:n], ", "), len(names)-n)
}

func podList(pods []*corev1.Pod) string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	sort.Strings(names)
	return FirstN(names, 5)
}

// PodTrigger starts a batch when a pod becomes provisionable.
type PodTrigger struct {
	Batcher *Batcher
}

// Observe is called for every pod event.
func (t *PodTrigger) Observe(pod *corev1.Pod) {
	if pods.IsProvisionable(pod) {
		t.Batcher.Trigger()
	}
}
