// Package disruption is the voluntary-disruption loop: every few seconds it
// reads the cluster, asks the pure pkg/disruption which nodes to remove or
// replace (emptiness, drift, consolidation) within budgets and protections,
// starts the command it chose beside the loop (several run at once, within
// the budgets), and says on every node it leaves alone why.
package disruption

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/explain"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Controller runs the disruption loop on the leader.
type Controller struct {
	Client        client.Client
	Cluster       *state.Cluster
	CloudProvider cloudprovider.CloudProvider
	Recorder      record.EventRecorder
	Clock         clock.WithTicker
	Poll          time.Duration
	SpotToSpot    bool
	Scheduling    scheduling.Options
	// ReadyTimeout bounds the wait for replacements; then the command is
	// abandoned, its replacements deleted and its candidates released.
	ReadyTimeout time.Duration
	// ValidationDelay is how long a command without replacements waits
	// before it starts and is checked again (Karpenter's 15 s): pods
	// kube-scheduler was binding when it was decided show up meanwhile, and
	// other nodes' room may have gone. Commands with replacements wait for
	// those instead.
	ValidationDelay time.Duration
	// Nominations are the nodes and NodeClaims the provisioner launched or
	// chose for pending pods; they are left alone for a while.
	Nominations *state.Nominations

	// Board, when set, gets each pass's word on every node it saw, for
	// `joiner explain` (served on the metrics port).
	Board *explain.Board

	// explained is the last DisruptionBlocked reason given per node, so
	// that each reason is told once.
	explained map[string]string
	// unweighed are the nodes the last read left out of the pass, and why.
	unweighed map[string]unweighedNode
	// reported are the NodePools whose budget gauges the last pass set.
	reported map[string]bool
	caution  disruption.Caution
	underway underway
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (c *Controller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("disruption"))
	// Commands cut short by shutdown release what they hold before the
	// process ends; what they cannot, the next leader's releaseStale does.
	defer c.Wait()
	wait := c.Poll
	for {
		// The wait starts when a pass ends, as Karpenter's requeue does. A
		// pass that started a command is followed by another at once
		// (after a second), as Karpenter requeues after a decision: the
		// budgets may allow more, and emptiness or another drift need not
		// wait a poll behind it.
		select {
		case <-ctx.Done():
			return nil
		case <-c.Clock.After(wait):
		}
		started, err := c.Pass(ctx)
		// A pass cut short by shutdown did not fail.
		if err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "disruption failed")
		}
		wait = c.Poll
		if started != nil {
			wait = min(c.Poll, time.Second)
		}
	}
}

// releaseStale removes the disrupted taint and the DisruptionReason that
// an earlier command left on NodeClaims it never deleted, so their nodes
// take pods again: a run that crashed, or a command whose release failed
// or ran out of time (a 153-node command's did, against a busy API
// server). The commands under way hold theirs; each pass releases the rest
// (as Karpenter does before each of its passes, sparing its queue's).
func (c *Controller) releaseStale(ctx context.Context) error {
	claims, err := c.Cluster.NodeClaims(ctx)
	if err != nil {
		return err
	}
	released := map[string]bool{}
	var errs []error
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil || meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason) == nil || c.underway.has(nc.Name) {
			continue
		}
		if err := c.release(ctx, nc.Status.NodeName, nc.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		log.FromContext(ctx).Info("released a node an earlier disruption left marked", "NodeClaim", map[string]string{"name": nc.Name})
		released[nc.Name] = true
	}
	// The replacements launched by the run that crashed: those whose
	// candidates were all just released are dropped as an abandoned
	// command's are; those of a command whose candidates went, even some of
	// them, are ordinary NodeClaims now: the pods of the ones that went
	// need them (consolidation takes any room left over).
	var abandoned, settled []*v1.NodeClaim
	for _, nc := range claims {
		replacing, ok := nc.Annotations[v1.AnnotationReplacing]
		if !ok || nc.DeletionTimestamp != nil || c.underway.replaces(nc) {
			continue
		}
		if !slices.ContainsFunc(strings.Split(replacing, ","), func(name string) bool { return !released[name] }) {
			abandoned = append(abandoned, nc)
		} else {
			settled = append(settled, nc)
		}
	}
	c.dropReplacements(ctx, abandoned)
	c.settleReplacements(ctx, settled)
	return errors.Join(errs...)
}

// candidateInfo is a candidate with the objects it was read from.
type candidateInfo struct {
	cand disruption.Candidate
	nc   *v1.NodeClaim
	node *corev1.Node
	pods int
	// planned are the pods the decision moved: what the command was sized for.
	planned map[string]bool
}

// Pass makes one decision and starts the command it chose, if any,
// without waiting for it: the channel returned gives the command's result
// (nil when none was started).
func (c *Controller) Pass(ctx context.Context) (<-chan error, error) {
	if err := c.releaseStale(ctx); err != nil {
		log.FromContext(ctx).Error(err, "releasing nodes an earlier disruption left marked")
	}
	cmd, byNode, err := c.decide(ctx)
	if err != nil || cmd == nil {
		return nil, err
	}
	if cmd.Risk > 0 {
		c.caution.Risked(c.Clock.Now())
	}
	return c.start(ctx, *cmd, byNode), nil
}

// Reconcile makes one decision and carries it out, returning once the
// command has finished.
func (c *Controller) Reconcile(ctx context.Context) error {
	started, err := c.Pass(ctx)
	if err != nil || started == nil {
		return err
	}
	return <-started
}

// decide plans in the cluster's plan slot, which it gives back before the
// command runs: a command waits minutes for replacements and drains, and
// the provisioner must not wait with it.
func (c *Controller) decide(ctx context.Context) (*disruption.Command, map[string]*candidateInfo, error) {
	done, err := c.Cluster.Plan(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	if c.explained == nil {
		c.explained = map[string]string{}
	}
	pending, err := c.Cluster.Pending(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pending {
		c.observePending(ctx, p)
	}
	snap, _, err := c.Cluster.Snapshot(ctx, pending)
	if err != nil {
		return nil, nil, err
	}
	if snap, err = c.withUnderway(ctx, snap, nil); err != nil {
		return nil, nil, err
	}
	c.prune(snap)
	infos, opts, err := c.read(ctx, snap, pending)
	if err != nil {
		return nil, nil, err
	}
	observeEligible(snap, infos)
	if len(infos) == 0 {
		c.record(snap, nil, disruption.Decision{})
		return nil, nil, nil
	}
	byNode := map[string]*candidateInfo{}
	cands := make([]disruption.Candidate, 0, len(infos))
	for _, info := range infos {
		byNode[info.cand.Node] = info
		cands = append(cands, info.cand)
	}
	decision := disruption.Decide(snap, cands, opts)
	log.FromContext(ctx).V(1).Info("evaluated consolidation", "candidates", len(cands), "commands", len(decision.Commands))
	c.explain(byNode, decision.Skipped)
	c.record(snap, infos, decision)
	if len(decision.Commands) == 0 {
		return nil, nil, nil
	}
	return &decision.Commands[0], byNode, nil
}

// observePending counts a pending pod against the last risky command, if
// kube-scheduler found no room for it after it: it did not follow the
// plan. Only kube-scheduler's Unschedulable counts: the pending copies of
// a deleting node's pods (state.Moving) carry their bound pod's
// PodScheduled=True, from whenever it was bound.
func (c *Controller) observePending(ctx context.Context, p *corev1.Pod) {
	for _, cond := range p.Status.Conditions {
		if cond.Type != corev1.PodScheduled || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		strike, n, until := c.caution.Observe(c.Clock.Now(), cond.LastTransitionTime.Time)
		if !strike {
			return
		}
		log.FromContext(ctx).Info("kube-scheduler left a pod pending after a consolidation that risked it", "Pod", map[string]string{"namespace": p.Namespace, "name": p.Name}, "strikes", n)
		if !until.IsZero() {
			log.FromContext(ctx).Info("consolidation takes no risk with kube-scheduler's placement for a while", "until", until.UTC().Format(time.RFC3339))
		}
		return
	}
}

// prune forgets the reasons given for nodes that are gone.
func (c *Controller) prune(snap scheduling.Snapshot) {
	present := make(map[string]bool, len(snap.Nodes))
	for _, n := range snap.Nodes {
		present[n.Name] = true
	}
	for name := range c.explained {
		if !present[name] {
			delete(c.explained, name)
		}
	}
}

// read lists the candidates (initialized NodeClaims with their node and
// price, and why each may not be disrupted) and the options of this round:
// budgets left per pool and reason, spot-to-spot, caution.
func (c *Controller) read(ctx context.Context, snap scheduling.Snapshot, pending []*corev1.Pod) ([]*candidateInfo, disruption.Options, error) {
	opts := disruption.Options{SpotToSpot: c.SpotToSpot, Cautious: c.caution.Cautious(c.Clock.Now()), Scheduling: c.Scheduling}
	// The cache's own NodeClaims: candidates are read, named in events and
	// deleted, never changed in place (see state.Cluster.Snapshot).
	claims, err := c.Cluster.NodeClaims(ctx)
	if err != nil {
		return nil, opts, err
	}
	// The cache's own nodes, read and never written: the taint and its
	// removal read each node afresh.
	nodeList, err := c.Cluster.Nodes(ctx)
	if err != nil {
		return nil, opts, err
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.Client.List(ctx, &pdbs); err != nil {
		return nil, opts, err
	}
	nodes := map[string]*corev1.Node{}
	for _, n := range nodeList {
		nodes[n.Name] = n
	}
	types := map[string]map[string]*cloudprovider.InstanceType{}
	for _, p := range append(append([]scheduling.NodePool(nil), snap.NodePools...), snap.Static...) {
		types[p.NodePool.Name] = map[string]*cloudprovider.InstanceType{}
		for _, it := range p.InstanceTypes {
			types[p.NodePool.Name][it.Name] = it
		}
	}
	marked := func(nc *v1.NodeClaim, node *corev1.Node) bool {
		return nc.DeletionTimestamp != nil || (node != nil && node.DeletionTimestamp != nil) || c.underway.has(nc.Name) ||
			meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason) != nil ||
			(node != nil && taints.Has(node.Spec.Taints, v1.DisruptedNoScheduleTaint))
	}
	saving := c.saving(ctx, claims, nodes, marked)
	opts.Saving = saving
	podsByNode := map[string][]*corev1.Pod{}
	for _, n := range snap.Nodes {
		podsByNode[n.Name] = n.Pods
	}
	waiting := map[string]bool{}
	for _, p := range pending {
		waiting[p.Namespace+"/"+p.Name] = true
	}
	var budgetNodes []disruption.BudgetNode
	c.unweighed = map[string]unweighedNode{}
	var out []*candidateInfo
	for _, nc := range claims {
		var node *corev1.Node
		if nc.Status.NodeName != "" {
			node = nodes[nc.Status.NodeName]
		}
		initialized := node != nil && meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized)
		budgetNodes = append(budgetNodes, disruption.BudgetNode{
			NodePool:            nc.Labels[v1.LabelNodePool],
			Initialized:         initialized,
			Ready:               node != nil && state.NodeReady(node),
			MarkedForDeletion:   marked(nc, node),
			InstanceTerminating: meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInstanceTerminating),
		})
		pool := types[nc.Labels[v1.LabelNodePool]]
		if pool == nil || !initialized || nc.DeletionTimestamp != nil || node.DeletionTimestamp != nil || c.underway.has(nc.Name) {
			if node != nil {
				underway := c.underway.has(nc.Name)
				c.unweighed[node.Name] = unweighedNode{nodeClaim: nc.Name, nodePool: nc.Labels[v1.LabelNodePool],
					reason: whyUnweighed(nc, node, pool != nil, initialized, underway), underway: underway && nc.DeletionTimestamp == nil && node.DeletionTimestamp == nil}
			}
			continue
		}
		typ, zone, ct := nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType]
		price := listPrice(pool[typ], zone, ct)
		if saving != nil {
			price = saving([]string{nc.Name})
		}
		info := &candidateInfo{nc: nc, node: node, cand: disruption.Candidate{Node: node.Name, NodeClaim: nc.Name, NodePool: nc.Labels[v1.LabelNodePool],
			InstanceType: typ, CapacityType: ct, Zone: zone, Price: price,
			Consolidatable: meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeConsolidatable)}}
		if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted) {
			info.cand.DriftedSince = meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted).LastTransitionTime.Time
		}
		onNode := podsByNode[node.Name]
		info.planned = map[string]bool{}
		for _, p := range onNode {
			if !pods.IsOwnedByNode(p) {
				info.pods++
				info.planned[disruption.PodKey(p)] = true
			}
		}
		// A nomination protects a node only while its pods still wait:
		// bound, they make the node busy; gone, they need nothing.
		var nominated []string
		for _, p := range c.Nominations.For(node.Name, nc.Name) {
			if waiting[p] {
				nominated = append(nominated, p)
			}
		}
		info.cand.Blocked = disruption.Protected(info.cand, node, onNode, pdbs.Items, nominated, c.Clock.Now())
		info.cand.Forceable = info.cand.Blocked != "" && nc.Spec.TerminationGracePeriod != nil &&
			disruption.Protected(info.cand, node, nil, nil, nominated, c.Clock.Now()) == ""
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].cand.Node < out[j].cand.Node })
	counts := disruption.CountBudgets(budgetNodes)
	now := c.Clock.Now()
	var pools []*v1.NodePool
	for _, p := range append(append([]scheduling.NodePool(nil), snap.NodePools...), snap.Static...) {
		pools = append(pools, p.NodePool)
	}
	errs := opts.SetBudgets(pools, counts, now)
	c.reportBudgets(pools, counts, now)
	for _, np := range pools {
		if err := errs[np.Name]; err != nil {
			log.FromContext(ctx).Error(err, "invalid disruption budget; allowing no disruption", "NodePool", map[string]string{"name": np.Name})
		}
	}
	return out, opts, nil
}

// explain emits an event on the Node and NodeClaim of every candidate left
// alone, once per distinct reason, so that "why was this not consolidated?"
// has an answer in kubectl describe.
func (c *Controller) explain(byNode map[string]*candidateInfo, skipped map[string]string) {
	for name, why := range skipped {
		if c.explained[name] == why {
			continue
		}
		c.explained[name] = why
		info := byNode[name]
		if info == nil {
			continue
		}
		c.Recorder.Event(info.node, corev1.EventTypeNormal, "DisruptionBlocked", why)
		c.Recorder.Event(info.nc, corev1.EventTypeNormal, "DisruptionBlocked", why)
	}
}

// observeEligible sets how many nodes this pass could disrupt for each
// reason, before budgets: what Karpenter's dashboard plots beside the
// decisions.
func observeEligible(snap scheduling.Snapshot, infos []*candidateInfo) {
	policy := map[string]v1.ConsolidationPolicy{}
	for _, p := range snap.NodePools {
		policy[p.NodePool.Name] = p.NodePool.Spec.Disruption.ConsolidationPolicy
	}
	var empty, underutilized, drifted int
	for _, info := range infos {
		c := info.cand
		if !c.DriftedSince.IsZero() && (c.Blocked == "" || c.Forceable) {
			drifted++
		}
		if c.Blocked != "" || !c.Consolidatable {
			continue
		}
		if info.pods == 0 {
			empty++
		}
		if policy[c.NodePool] == v1.ConsolidationPolicyWhenEmptyOrUnderutilized {
			underutilized++
		}
	}
	metrics.DisruptionEligibleNodes.WithLabelValues("empty").Set(float64(empty))
	metrics.DisruptionEligibleNodes.WithLabelValues("underutilized").Set(float64(underutilized))
	metrics.DisruptionEligibleNodes.WithLabelValues("drifted").Set(float64(drifted))
}
