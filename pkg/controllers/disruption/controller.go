// Package disruption is the voluntary-disruption loop: every few seconds it
// decides which nodes to remove or replace (emptiness, drift, consolidation),
// within budgets and protections, carries out one decision at a time, and
// says on every node it leaves alone why.
package disruption

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/node/termination"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/provisioning"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	// ReadyTimeout bounds the wait for replacements; then the command is
	// abandoned and its candidates released.
	ReadyTimeout time.Duration

	explained map[string]string
	// lastRisky is when the last command began that kube-scheduler could
	// leave pods pending from; cautiousUntil, when such a command did leave
	// pods pending, stops the taking of risks for a while.
	lastRisky, cautiousUntil time.Time
	strikes                  []time.Time
}

// strike counts a risky command that left pod p pending; the third within
// CautionPeriod makes consolidation cautious for CautionPeriod.
func (c *Controller) strike(ctx context.Context, p *corev1.Pod) {
	now := c.Clock.Now()
	c.lastRisky = time.Time{}
	kept := c.strikes[:0]
	for _, s := range c.strikes {
		if now.Sub(s) < CautionPeriod {
			kept = append(kept, s)
		}
	}
	c.strikes = append(kept, now)
	log.FromContext(ctx).Info("kube-scheduler left a pod pending after a consolidation that risked it", "Pod", map[string]string{"namespace": p.Namespace, "name": p.Name}, "strikes", len(c.strikes))
	if len(c.strikes) >= CautionStrikes {
		c.cautiousUntil = now.Add(CautionPeriod)
		c.strikes = nil
		log.FromContext(ctx).Info("consolidation takes no risk with kube-scheduler's placement for a while", "until", c.cautiousUntil.UTC().Format(time.RFC3339))
	}
}

// Consolidation may take a command that kube-scheduler could make leave a
// pod pending, when the savings exceed the cost of a node for such pods.
// When that happens CautionStrikes times within CautionPeriod, it takes no
// such risk for CautionPeriod: a plan kube-scheduler keeps not following
// must not repeat, each time stranding a pod and launching a node.
const (
	CautionStrikes = 3
	CautionPeriod  = time.Hour
)

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (c *Controller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("disruption"))
	c.explained = map[string]string{}
	if err := c.releaseStale(ctx); err != nil {
		log.FromContext(ctx).Error(err, "releasing nodes left tainted by an earlier run")
	}
	t := c.Clock.NewTicker(c.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		if err := c.Reconcile(ctx); err != nil {
			log.FromContext(ctx).Error(err, "disruption failed")
		}
	}
}

// releaseStale removes the disrupted taint that a crashed run left on
// nodes it never deleted, so they take pods again.
func (c *Controller) releaseStale(ctx context.Context) error {
	var claims v1.NodeClaimList
	if err := c.Client.List(ctx, &claims); err != nil {
		return err
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil || meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason) == nil {
			continue
		}
		if node := c.nodeOf(ctx, nc); node != nil {
			if err := c.untaint(ctx, node); err != nil {
				return err
			}
		}
		stored := nc.DeepCopy()
		meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeDisruptionReason)
		if err := c.Client.Status().Patch(ctx, nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

type candidateInfo struct {
	cand  disruption.Candidate
	nc    *v1.NodeClaim
	node  *corev1.Node
	pods  int
	drift bool
}

// PendingGrace is how long a newly pending pod pauses disruption. Capacity
// launched for it looks empty until kube-scheduler binds it, and must not
// be taken for an empty node; pods pending longer than this, which no
// launch is coming for, do not hold disruption back.
const PendingGrace = 2 * time.Minute

// Reconcile makes one decision and carries it out.
func (c *Controller) Reconcile(ctx context.Context) error {
	var all corev1.PodList
	if err := c.Client.List(ctx, &all); err != nil {
		return err
	}
	for i := range all.Items {
		p := &all.Items[i]
		if !pods.IsProvisionable(p) {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && c.Clock.Since(cond.LastTransitionTime.Time) < PendingGrace {
				at := cond.LastTransitionTime.Time
				if !c.lastRisky.IsZero() && !at.Before(c.lastRisky) && at.Before(c.lastRisky.Add(10*time.Minute)) {
					c.strike(ctx, p)
				}
				log.FromContext(ctx).V(1).Info("waiting for pending pods to schedule before disrupting", "Pod", map[string]string{"namespace": p.Namespace, "name": p.Name})
				return nil
			}
		}
	}
	snap, _, err := c.Cluster.Snapshot(ctx, nil)
	if err != nil {
		return err
	}
	infos, pools, err := c.candidates(ctx, snap)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		return nil
	}
	// Drift first, one node at a time, as Karpenter orders its methods.
	if done, err := c.drift(ctx, snap, infos, pools); done || err != nil {
		return err
	}
	opts := disruption.Options{Allowed: map[string]int{}, AllowedEmpty: map[string]int{}, Policy: map[string]v1.ConsolidationPolicy{}, SpotToSpot: c.SpotToSpot,
		Cautious: c.Clock.Now().Before(c.cautiousUntil)}
	for name, p := range pools {
		opts.Allowed[name] = c.allowed(ctx, p, v1.DisruptionReasonUnderutilized)
		opts.AllowedEmpty[name] = c.allowed(ctx, p, v1.DisruptionReasonEmpty)
		opts.Policy[name] = p.np.Spec.Disruption.ConsolidationPolicy
	}
	var cands []disruption.Candidate
	byNode := map[string]*candidateInfo{}
	for _, info := range infos {
		cand := info.cand
		if cand.Blocked == "" {
			if p := pools[cand.NodePool]; p != nil && p.np.Spec.Disruption.ConsolidateAfter.IsNever() {
				cand.Blocked = "consolidateAfter is Never"
			} else if !meta.IsStatusConditionTrue(info.nc.Status.Conditions, v1.ConditionTypeConsolidatable) {
				cand.Blocked = "" // not yet quiet for consolidateAfter; not worth an event
				continue
			}
		}
		cands = append(cands, cand)
		byNode[cand.Node] = info
	}
	decision := disruption.Consolidate(snap, cands, opts)
	log.FromContext(ctx).V(1).Info("evaluated consolidation", "candidates", len(cands), "commands", len(decision.Commands))
	c.explain(byNode, decision.Skipped)
	if len(decision.Commands) == 0 {
		return nil
	}
	cmd := decision.Commands[0]
	if cmd.Risk > 0 {
		c.lastRisky = c.Clock.Now().Truncate(time.Second)
	}
	return c.execute(ctx, cmd, byNode)
}

type poolInfo struct {
	np    *v1.NodePool
	nodes int
}

// candidates lists initialized NodeClaims with their node and price, and
// why each may not be disrupted voluntarily.
func (c *Controller) candidates(ctx context.Context, snap scheduling.Snapshot) ([]*candidateInfo, map[string]*poolInfo, error) {
	var claims v1.NodeClaimList
	if err := c.Client.List(ctx, &claims); err != nil {
		return nil, nil, err
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.Client.List(ctx, &pdbs); err != nil {
		return nil, nil, err
	}
	pools := map[string]*poolInfo{}
	types := map[string]map[string]*cloudprovider.InstanceType{}
	for _, p := range snap.NodePools {
		pools[p.NodePool.Name] = &poolInfo{np: p.NodePool}
		types[p.NodePool.Name] = map[string]*cloudprovider.InstanceType{}
		for _, it := range p.InstanceTypes {
			types[p.NodePool.Name][it.Name] = it
		}
	}
	podsByNode := map[string][]*corev1.Pod{}
	for _, n := range snap.Nodes {
		podsByNode[n.Name] = n.Pods
	}
	var out []*candidateInfo
	for i := range claims.Items {
		nc := &claims.Items[i]
		pool := pools[nc.Labels[v1.LabelNodePool]]
		if pool == nil {
			continue
		}
		pool.nodes++
		if nc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			continue
		}
		node := c.nodeOf(ctx, nc)
		if node == nil || node.DeletionTimestamp != nil {
			continue
		}
		typ, zone, ct := nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType]
		price := math.Inf(1)
		if it := types[pool.np.Name][typ]; it != nil {
			for _, o := range it.Offerings {
				if o.Zone == zone && o.CapacityType == ct {
					price = o.Price
				}
			}
		}
		info := &candidateInfo{nc: nc, node: node, drift: meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted),
			cand: disruption.Candidate{Node: node.Name, NodeClaim: nc.Name, NodePool: pool.np.Name, InstanceType: typ, CapacityType: ct, Price: price}}
		onNode := podsByNode[node.Name]
		for _, p := range onNode {
			if !pods.IsOwnedByNode(p) {
				info.pods++
			}
		}
		info.cand.Blocked = blocked(node, onNode, pdbs.Items)
		if math.IsInf(price, 1) && info.cand.Blocked == "" {
			info.cand.Blocked = fmt.Sprintf("no price known for %s %s in %s", ct, typ, zone)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].cand.Node < out[j].cand.Node })
	return out, pools, nil
}

// blocked says why a node's voluntary disruption is not allowed now.
func blocked(node *corev1.Node, onNode []*corev1.Pod, pdbs []policyv1.PodDisruptionBudget) string {
	if node.Annotations[v1.AnnotationDoNotDisrupt] == "true" {
		return fmt.Sprintf("node has %q", v1.AnnotationDoNotDisrupt+": true")
	}
	for _, p := range onNode {
		if pods.IsOwnedByNode(p) || pods.IsTerminal(p) {
			continue
		}
		if pods.DoNotDisrupt(p) {
			return fmt.Sprintf("pod %s/%s has %q", p.Namespace, p.Name, v1.AnnotationDoNotDisrupt+": true")
		}
		var matching []string
		for i := range pdbs {
			pdb := &pdbs[i]
			if pdb.Namespace != p.Namespace || pdb.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			matching = append(matching, pdb.Name)
			if pdb.Status.DisruptionsAllowed == 0 {
				return fmt.Sprintf("PDB %s/%s blocks the eviction of pod %s/%s (0 disruptions allowed)", pdb.Namespace, pdb.Name, p.Namespace, p.Name)
			}
		}
		if len(matching) > 1 {
			return fmt.Sprintf("pod %s/%s is covered by more than one PDB (%s), which the Eviction API refuses", p.Namespace, p.Name, strings.Join(matching, ", "))
		}
	}
	return ""
}

// allowed is the pool's budget for reason less what is disrupting now.
func (c *Controller) allowed(ctx context.Context, p *poolInfo, reason v1.DisruptionReason) int {
	n, err := disruption.Allowed(p.np, reason, p.nodes, c.Clock.Now())
	if err != nil {
		log.FromContext(ctx).Error(err, "invalid disruption budget; allowing no disruption", "NodePool", map[string]string{"name": p.np.Name})
		return 0
	}
	var claims v1.NodeClaimList
	if err := c.Client.List(ctx, &claims, client.MatchingLabels{v1.LabelNodePool: p.np.Name}); err != nil {
		return 0
	}
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp != nil || meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason) != nil {
			n--
		}
	}
	if n < 0 {
		return 0
	}
	return n
}

// drift replaces the oldest drifted node, if any may go.
func (c *Controller) drift(ctx context.Context, snap scheduling.Snapshot, infos []*candidateInfo, pools map[string]*poolInfo) (bool, error) {
	var drifted []*candidateInfo
	for _, info := range infos {
		if info.drift {
			drifted = append(drifted, info)
		}
	}
	if len(drifted) == 0 {
		return false, nil
	}
	sort.SliceStable(drifted, func(i, j int) bool {
		// Empty ones first, then the longest drifted.
		if (drifted[i].pods == 0) != (drifted[j].pods == 0) {
			return drifted[i].pods == 0
		}
		return driftedAt(drifted[i].nc).Before(driftedAt(drifted[j].nc))
	})
	cluster := scheduling.NewCluster(snap, scheduling.Options{})
	skipped := map[string]string{}
	byNode := map[string]*candidateInfo{}
	for _, info := range drifted {
		byNode[info.cand.Node] = info
		if info.cand.Blocked != "" {
			skipped[info.cand.Node] = "drifted, but " + info.cand.Blocked
			continue
		}
		if c.allowed(ctx, pools[info.cand.NodePool], v1.DisruptionReasonDrifted) <= 0 {
			skipped[info.cand.Node] = fmt.Sprintf("drifted, but the disruption budget of nodepool %q allows no more disruptions now", info.cand.NodePool)
			continue
		}
		r, err := cluster.TryRemove(info.cand.Node)
		if err != nil || len(r.Unschedulable) > 0 {
			skipped[info.cand.Node] = "drifted, but its pods would not fit anywhere else"
			continue
		}
		cmd := disruption.Command{Reason: v1.DisruptionReasonDrifted, Candidates: []disruption.Candidate{info.cand}}
		cmd.Replacements = r.Replacements
		c.explain(byNode, skipped)
		return true, c.execute(ctx, cmd, byNode)
	}
	c.explain(byNode, skipped)
	return false, nil
}

func driftedAt(nc *v1.NodeClaim) time.Time {
	if cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted); cond != nil {
		return cond.LastTransitionTime.Time
	}
	return time.Time{}
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

// execute carries out a command: launch the replacements and wait until
// they are initialized, then taint the candidates and delete them (their
// termination drains them through the Eviction API).
func (c *Controller) execute(ctx context.Context, cmd disruption.Command, byNode map[string]*candidateInfo) error {
	logger := log.FromContext(ctx)
	repl := cmd.Replacements
	how := "delete"
	if len(repl) > 0 {
		how = "replace"
	}
	var nodes []string
	pods := 0
	for _, cand := range cmd.Candidates {
		info := byNode[cand.Node]
		nodes = append(nodes, fmt.Sprintf("%s/%s/%s", cand.Node, cand.InstanceType, cand.CapacityType))
		if info != nil {
			pods += info.pods
		}
	}
	msg := fmt.Sprintf("disrupting nodeclaim(s) via %s, terminating %d nodes (%d pods) %s", how, len(cmd.Candidates), pods, strings.Join(nodes, ", "))
	var replacing []string
	for _, r := range repl {
		var names []string
		for _, it := range r.InstanceTypes {
			names = append(names, it.Name)
		}
		replacing = append(replacing, fmt.Sprintf("%s node from types %s", r.Offering.CapacityType, provisioning.FirstN(names, 5)))
	}
	switch {
	case len(replacing) == 1:
		msg += " and replacing with " + replacing[0]
	case len(replacing) > 1:
		// Karpenter never replaces with more than one node; Joiner's repack
		// may, and lists each.
		msg += fmt.Sprintf(" and replacing with %d nodes: %s", len(replacing), strings.Join(replacing, "; "))
	}
	logger.Info(msg, "reason", strings.ToLower(string(cmd.Reason)), "savings", fmt.Sprintf("$%.4f/h", cmd.Savings))

	for _, cand := range cmd.Candidates {
		if info := byNode[cand.Node]; info != nil {
			stored := info.nc.DeepCopy()
			meta.SetStatusCondition(&info.nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
				Reason: string(cmd.Reason), ObservedGeneration: info.nc.Generation, LastTransitionTime: metav1.NewTime(c.Clock.Now())})
			if err := c.Client.Status().Patch(ctx, info.nc, client.MergeFrom(stored)); err != nil {
				return err
			}
		}
	}
	var created []*v1.NodeClaim
	for _, r := range repl {
		nc, err := c.createReplacement(ctx, r, cmd.Reason)
		if err != nil {
			c.abandon(ctx, cmd, byNode)
			return err
		}
		created = append(created, nc)
	}
	if len(created) > 0 {
		if err := c.waitInitialized(ctx, created); err != nil {
			logger.Error(err, "replacement did not initialize; abandoning the disruption")
			c.abandon(ctx, cmd, byNode)
			return nil
		}
	}
	// Re-validate: while the replacements launched, a pod that must not be
	// disrupted, or a PDB that allows no eviction, may have arrived.
	if why, err := c.revalidate(ctx, cmd, byNode); err != nil || why != "" {
		if why != "" {
			logger.Info("abandoning the disruption: "+why, "reason", strings.ToLower(string(cmd.Reason)))
			for _, cand := range cmd.Candidates {
				if info := byNode[cand.Node]; info != nil {
					c.Recorder.Event(info.nc, corev1.EventTypeNormal, "DisruptionBlocked", "disruption abandoned: "+why)
				}
			}
		}
		c.abandon(ctx, cmd, byNode)
		return err
	}
	for _, cand := range cmd.Candidates {
		info := byNode[cand.Node]
		if info == nil {
			continue
		}
		if err := c.taint(ctx, info.node); err != nil {
			return err
		}
		c.Recorder.Event(info.nc, corev1.EventTypeNormal, "DisruptionTerminating", fmt.Sprintf("Disrupting NodeClaim: %s/%s", how, cmd.Reason))
		if err := c.Client.Delete(ctx, info.nc); client.IgnoreNotFound(err) != nil {
			return err
		}
		metrics.NodeClaimsDisrupted.WithLabelValues(strings.ToLower(string(cmd.Reason)), cand.NodePool).Inc()
	}
	// Decide again only once the candidates are gone: until their pods have
	// moved, the replacement looks empty.
	return c.waitGone(ctx, cmd.Candidates)
}

// revalidate says why a command's candidates may no longer be disrupted,
// from fresh pods and PDBs; empty when they still may.
func (c *Controller) revalidate(ctx context.Context, cmd disruption.Command, byNode map[string]*candidateInfo) (string, error) {
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.Client.List(ctx, &pdbs); err != nil {
		return "", err
	}
	for _, cand := range cmd.Candidates {
		info := byNode[cand.Node]
		if info == nil {
			continue
		}
		var node corev1.Node
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(info.node), &node); err != nil {
			return "", client.IgnoreNotFound(err)
		}
		var onNode corev1.PodList
		if err := c.Client.List(ctx, &onNode, client.MatchingFields{termination.NodeNameIndex: node.Name}); err != nil {
			return "", err
		}
		var ptrs []*corev1.Pod
		for i := range onNode.Items {
			ptrs = append(ptrs, &onNode.Items[i])
		}
		if why := blocked(&node, ptrs, pdbs.Items); why != "" {
			return fmt.Sprintf("node %s: %s", node.Name, why), nil
		}
	}
	return "", nil
}

func (c *Controller) createReplacement(ctx context.Context, r *scheduling.NewNodeClaim, reason v1.DisruptionReason) (*v1.NodeClaim, error) {
	var np v1.NodePool
	if err := c.Client.Get(ctx, client.ObjectKey{Name: r.NodePool}, &np); err != nil {
		return nil, err
	}
	nc, err := provisioning.NewNodeClaim(&np, r, c.Client.Scheme())
	if err != nil {
		return nil, err
	}
	if err := c.Client.Create(ctx, nc); err != nil {
		return nil, err
	}
	metrics.NodeClaimsCreated.WithLabelValues(strings.ToLower(string(reason)), np.Name).Inc()
	return nc, nil
}

// cacheGrace is how long a NodeClaim just created may be missing from the
// informer cache before it counts as deleted.
const cacheGrace = 10 * time.Second

func (c *Controller) waitInitialized(ctx context.Context, claims []*v1.NodeClaim) error {
	start := c.Clock.Now()
	deadline := start.Add(c.ReadyTimeout)
	for {
		ready := 0
		for _, want := range claims {
			var nc v1.NodeClaim
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(want), &nc); err != nil {
				// The cache may not have seen a NodeClaim just created; one
				// still missing after that was deleted (a failed launch).
				if apierrors.IsNotFound(err) && c.Clock.Since(start) < cacheGrace {
					continue
				}
				return fmt.Errorf("replacement %s: %w", want.Name, err)
			}
			if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				ready++
			}
		}
		if ready == len(claims) {
			return nil
		}
		if c.Clock.Now().After(deadline) {
			return fmt.Errorf("replacements not initialized after %s", c.ReadyTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.Clock.After(time.Second):
		}
	}
}

func (c *Controller) waitGone(ctx context.Context, cands []disruption.Candidate) error {
	deadline := c.Clock.Now().Add(c.ReadyTimeout)
	for c.Clock.Now().Before(deadline) {
		left := 0
		for _, cand := range cands {
			var nc v1.NodeClaim
			if err := c.Client.Get(ctx, client.ObjectKey{Name: cand.NodeClaim}, &nc); err == nil {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.Clock.After(time.Second):
		}
	}
	return nil
}

// abandon releases candidates of a command that cannot complete.
func (c *Controller) abandon(ctx context.Context, cmd disruption.Command, byNode map[string]*candidateInfo) {
	for _, cand := range cmd.Candidates {
		if info := byNode[cand.Node]; info != nil {
			_ = c.untaint(ctx, info.node)
			var nc v1.NodeClaim
			if err := c.Client.Get(ctx, client.ObjectKey{Name: info.nc.Name}, &nc); err == nil {
				stored := nc.DeepCopy()
				meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeDisruptionReason)
				_ = c.Client.Status().Patch(ctx, &nc, client.MergeFrom(stored))
			}
		}
	}
}

func (c *Controller) nodeOf(ctx context.Context, nc *v1.NodeClaim) *corev1.Node {
	if nc.Status.NodeName == "" {
		return nil
	}
	var node corev1.Node
	if err := c.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
		return nil
	}
	return &node
}

func (c *Controller) taint(ctx context.Context, node *corev1.Node) error {
	var fresh corev1.Node
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(node), &fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	if taints.Has(fresh.Spec.Taints, v1.DisruptedNoScheduleTaint) {
		return nil
	}
	stored := fresh.DeepCopy()
	fresh.Spec.Taints = append(fresh.Spec.Taints, v1.DisruptedNoScheduleTaint)
	if err := c.Client.Patch(ctx, &fresh, client.MergeFrom(stored)); err != nil {
		return err
	}
	log.FromContext(ctx).Info("tainted node", "Node", map[string]string{"name": fresh.Name}, "taint.Key", v1.DisruptedNoScheduleTaint.Key, "taint.Value", "", "taint.Effect", string(v1.DisruptedNoScheduleTaint.Effect))
	return nil
}

func (c *Controller) untaint(ctx context.Context, node *corev1.Node) error {
	var fresh corev1.Node
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(node), &fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	stored := fresh.DeepCopy()
	var kept []corev1.Taint
	for _, t := range fresh.Spec.Taints {
		if !t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(fresh.Spec.Taints) {
		return nil
	}
	fresh.Spec.Taints = kept
	return c.Client.Patch(ctx, &fresh, client.MergeFrom(stored))
}
