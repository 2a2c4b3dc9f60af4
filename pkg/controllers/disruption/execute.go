package disruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/provisioning"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// run is one command being carried out and what it has changed so far.
// Every way out of execute goes through finish, which undoes what the
// command no longer needs: an error path added later cannot forget a
// taint, a DisruptionReason or a replacement.
type run struct {
	cmd   disruption.Command
	infos []*candidateInfo
	// marked candidates may carry the DisruptionReason and the taint.
	marked []*candidateInfo
	// created are the replacements launched.
	created []*v1.NodeClaim
	// deleting are the candidate NodeClaims whose deletion was accepted.
	deleting map[string]bool
	// unready: the replacements were up but not all initialized in time.
	// They are kept, as Karpenter keeps them: one may still initialize,
	// and what landed on it stays. Drift then waits for them rather than
	// launching more (disruption.Drift).
	unready bool
}

// cleanupTimeout bounds the API calls that release a command after its
// context ended.
const cleanupTimeout = 30 * time.Second

// releaseWorkers release a command's nodes at once; the client's rate
// limit still bounds what they ask of the API server.
const releaseWorkers = 16

// execute carries out a command, in Karpenter's order: mark and taint the
// candidates, so that kube-scheduler puts nothing more on them; launch the
// replacements and wait until they are initialized; check on a fresh
// snapshot, with the pods now present, that the plan still holds; then
// delete the candidates (their termination drains them through the
// Eviction API). Abandoned, the command releases its candidates and deletes
// its replacements.
func (c *Controller) execute(ctx context.Context, cmd disruption.Command, byNode map[string]*candidateInfo) (err error) {
	logger := log.FromContext(ctx)
	how := "delete"
	if len(cmd.Replacements) > 0 {
		how = "replace"
	}
	r := &run{cmd: cmd, deleting: map[string]bool{}}
	for _, cand := range cmd.Candidates {
		if info := byNode[cand.Node]; info != nil {
			r.infos = append(r.infos, info)
		}
	}
	// A deletion waits before it starts, as Karpenter's validation does,
	// with its candidates still open to pods: pods kube-scheduler was
	// binding when it was decided show up, and the recheck below, after
	// the taint, weighs them. Tainting first would hold the candidates'
	// room away from pending pods for the whole wait.
	if len(cmd.Replacements) == 0 && c.ValidationDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.Clock.After(c.ValidationDelay):
		}
	}
	logger.Info(decisionMessage(cmd, how, r.infos), "reason", strings.ToLower(string(cmd.Reason)), "savings", fmt.Sprintf("$%.4f/h", cmd.Savings))
	metrics.DisruptionDecisions.WithLabelValues(how, strings.ToLower(string(cmd.Reason)), consolidationType(cmd)).Inc()
	defer func() { c.finish(ctx, r) }()

	for _, info := range r.infos {
		r.marked = append(r.marked, info)
		if err := c.setReason(ctx, info.nc.Name, cmd.Reason); err != nil {
			return fmt.Errorf("marking nodeclaim %s: %w", info.nc.Name, err)
		}
		if err := c.taint(ctx, info.node.Name); err != nil {
			return fmt.Errorf("tainting node %s: %w", info.node.Name, err)
		}
	}
	var replacing []string
	for _, info := range r.infos {
		replacing = append(replacing, info.nc.Name)
	}
	for _, repl := range cmd.Replacements {
		nc, err := c.createReplacement(ctx, repl, cmd.Reason, strings.Join(replacing, ","))
		if err != nil {
			return fmt.Errorf("launching a replacement: %w", err)
		}
		r.created = append(r.created, nc)
		for _, info := range r.infos {
			c.Recorder.Eventf(info.nc, corev1.EventTypeNormal, "DisruptionLaunching", "Launching NodeClaim %s to replace this one (%s)", nc.Name, cmd.Reason)
		}
	}
	if len(r.created) > 0 {
		for _, info := range r.infos {
			c.Recorder.Event(info.nc, corev1.EventTypeNormal, "DisruptionWaitingReadiness", "Waiting for the replacements to initialize before draining")
		}
		if err := c.waitInitialized(ctx, r.created); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logger.Error(err, "replacement did not initialize; abandoning the disruption")
			r.unready = errors.Is(err, errNotInitialized)
			return nil
		}
	}
	goes, why, err := c.recheck(ctx, r)
	if err != nil {
		return fmt.Errorf("re-checking the disruption: %w", err)
	}
	if why != "" {
		kept := r.infos
		if len(goes) == 0 {
			logger.Info("abandoning the disruption: "+why, "reason", strings.ToLower(string(cmd.Reason)))
		} else {
			kept = without(r.infos, goes)
			logger.Info(fmt.Sprintf("going ahead with %d of the disruption's %d nodes, the rest stay: %s", len(goes), len(r.infos), why),
				"reason", strings.ToLower(string(cmd.Reason)))
		}
		for _, info := range kept {
			c.Recorder.Event(info.nc, corev1.EventTypeNormal, "DisruptionBlocked", "disruption abandoned: "+why)
		}
	}
	var deleted []disruption.Candidate
	for _, info := range goes {
		c.Recorder.Event(info.nc, corev1.EventTypeNormal, "DisruptionTerminating", fmt.Sprintf("Disrupting NodeClaim: %s/%s", how, cmd.Reason))
		if err := c.Client.Delete(ctx, info.nc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting nodeclaim %s: %w", info.nc.Name, err)
		}
		r.deleting[info.nc.Name] = true
		deleted = append(deleted, info.cand)
		metrics.NodeClaimsDisrupted.WithLabelValues(strings.ToLower(string(cmd.Reason)), info.cand.NodePool, info.cand.CapacityType).Inc()
	}
	if len(deleted) == 0 {
		return nil
	}
	// Decide again only once the candidates are gone: until their pods have
	// moved, the replacement looks empty.
	return c.waitGone(ctx, deleted)
}

// without are the candidates of all not in some.
func without(all, some []*candidateInfo) []*candidateInfo {
	var out []*candidateInfo
	for _, info := range all {
		if !slices.Contains(some, info) {
			out = append(out, info)
		}
	}
	return out
}

// finish releases what a command leaves behind. Candidates whose deletion
// never began lose the taint and the DisruptionReason. When none was
// deleted because the plan no longer held once the replacements were up,
// the replacements are deleted too, except one that pods have landed on
// meanwhile: deleting it would evict them outside any budget, and
// consolidation weighs it like any other node. When a replacement did not
// initialize in time, those launched stay, as in Karpenter (its regression
// suite holds it to that). When some candidates were deleted, the
// replacements stay: they hold those nodes' pods, and consolidation
// removes whatever room is left over.
func (c *Controller) finish(ctx context.Context, r *run) {
	logger := log.FromContext(ctx)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	// In parallel: one at a time, a command of 153 nodes did not release
	// them within cleanupTimeout on a busy API server. What is not
	// released here, the next pass releases (releaseStale).
	workqueue.ParallelizeUntil(ctx, releaseWorkers, len(r.marked), func(i int) {
		info := r.marked[i]
		if r.deleting[info.nc.Name] {
			return
		}
		if err := c.release(ctx, info.node.Name, info.nc.Name); err != nil {
			logger.Error(err, "releasing a node of the disruption", "NodeClaim", map[string]string{"name": info.nc.Name})
		}
	})
	if len(r.deleting) > 0 || len(r.created) == 0 || r.unready {
		c.settleReplacements(ctx, r.created)
		return
	}
	c.dropReplacements(ctx, r.created)
}

// dropReplacements deletes the replacements of a command that deleted none
// of its candidates, except one that pods have landed on meanwhile.
func (c *Controller) dropReplacements(ctx context.Context, created []*v1.NodeClaim) {
	if len(created) == 0 {
		return // every pass asks; reading every pod for nothing is not free
	}
	logger := log.FromContext(ctx)
	busy, err := c.busyNodes(ctx)
	if err != nil {
		logger.Error(err, "listing pods; keeping the replacements of an abandoned disruption")
		return
	}
	var kept []*v1.NodeClaim
	for _, nc := range created {
		var fresh v1.NodeClaim
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(nc), &fresh); err == nil && busy[fresh.Status.NodeName] {
			logger.Info("keeping the replacement of an abandoned disruption: pods run on it", "NodeClaim", map[string]string{"name": nc.Name})
			kept = append(kept, nc)
			continue
		}
		if err := c.Client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			logger.Error(err, "deleting the replacement of an abandoned disruption", "NodeClaim", map[string]string{"name": nc.Name})
			continue
		}
		logger.Info("deleted the replacement of an abandoned disruption", "NodeClaim", map[string]string{"name": nc.Name})
	}
	c.settleReplacements(ctx, kept)
}

// settleReplacements makes the replacements a command keeps ordinary
// NodeClaims: their command is over.
func (c *Controller) settleReplacements(ctx context.Context, kept []*v1.NodeClaim) {
	for _, nc := range kept {
		var fresh v1.NodeClaim
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(nc), &fresh); err != nil {
			continue
		}
		if _, ok := fresh.Annotations[v1.AnnotationReplacing]; !ok {
			continue
		}
		stored := fresh.DeepCopy()
		delete(fresh.Annotations, v1.AnnotationReplacing)
		if err := c.Client.Patch(ctx, &fresh, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
			log.FromContext(ctx).Error(err, "marking a replacement as settled", "NodeClaim", map[string]string{"name": nc.Name})
		}
	}
}

// busyNodes are the nodes running pods other than their own (DaemonSet,
// mirror): pods that deleting the node would evict.
func (c *Controller) busyNodes(ctx context.Context) (map[string]bool, error) {
	all, err := c.Cluster.Pods(ctx)
	if err != nil {
		return nil, err
	}
	busy := map[string]bool{}
	for _, p := range all {
		if p.Spec.NodeName != "" && !pods.IsOwnedByNode(p) && !pods.IsTerminal(p) {
			busy[p.Spec.NodeName] = true
		}
	}
	return busy, nil
}

// decisionMessage is Karpenter's v1.0–v1.2 decision log line.
func decisionMessage(cmd disruption.Command, how string, infos []*candidateInfo) string {
	var nodes []string
	n := 0
	for _, cand := range cmd.Candidates {
		nodes = append(nodes, fmt.Sprintf("%s/%s/%s", cand.Node, cand.InstanceType, cand.CapacityType))
	}
	for _, info := range infos {
		n += info.pods
	}
	msg := fmt.Sprintf("disrupting nodeclaim(s) via %s, terminating %d nodes (%d pods) %s", how, len(cmd.Candidates), n, strings.Join(nodes, ", "))
	var replacing []string
	for _, r := range cmd.Replacements {
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
	return msg
}

// recheck returns the candidates that may still go, from fresh pods, PDBs
// and nodes, and why the others may not ("" when all may): a protection
// that arrived (a do-not-disrupt pod, a PDB that allows no eviction), or
// pods that no longer fit once the candidates go (see disruption.Recheck).
// A deletion of several nodes goes ahead with the candidates before the
// first that may not go; any other command goes whole or not at all.
func (c *Controller) recheck(ctx context.Context, r *run) ([]*candidateInfo, string, error) {
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.Client.List(ctx, &pdbs); err != nil {
		return nil, "", err
	}
	done, err := c.Cluster.Plan(ctx)
	if err != nil {
		return nil, "", err
	}
	defer done()
	pending, err := c.Cluster.Pending(ctx)
	if err != nil {
		return nil, "", err
	}
	snap, _, err := c.Cluster.Snapshot(ctx, pending)
	if err != nil {
		return nil, "", err
	}
	// The other commands under way will take room their pods need.
	if snap, err = c.withUnderway(ctx, snap, &r.cmd); err != nil {
		return nil, "", err
	}
	inSnap := map[string]*scheduling.Node{}
	for _, n := range snap.Nodes {
		inSnap[n.Name] = n
	}
	partial := len(r.cmd.Replacements) == 0 && len(r.infos) > 1
	present := r.cmd
	present.Candidates = nil
	// goes are the candidates that may go so far: the nodes already gone,
	// then those present, up to the first protected one.
	var goes, presentInfos []*candidateInfo
	var why string
	arrived := 0
	for _, info := range r.infos {
		var node corev1.Node
		if err := c.Client.Get(ctx, client.ObjectKey{Name: info.node.Name}, &node); err != nil {
			if apierrors.IsNotFound(err) {
				goes = append(goes, info) // gone already: nothing of it to recheck
				continue
			}
			return nil, "", err
		}
		sn := inSnap[node.Name]
		if sn == nil {
			goes = append(goes, info)
			continue
		}
		onNode := sn.Pods
		if info.cand.Forceable && r.cmd.Reason == v1.DisruptionReasonDrifted {
			onNode = nil // its pods may block the drain, not the drift
		}
		if blocked := disruption.Blocked(&node, onNode, pdbs.Items, c.Clock.Now()); blocked != "" {
			why = fmt.Sprintf("node %s: %s", node.Name, blocked)
			if !partial {
				return nil, why, nil
			}
			break
		}
		present.Candidates = append(present.Candidates, info.cand)
		presentInfos = append(presentInfos, info)
		arrived += len(disruption.Arrived(info.planned, sn.Pods))
	}
	// Pods that land on a replacement take room the plan gave the
	// candidates' pods.
	for _, nc := range r.created {
		var fresh v1.NodeClaim
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(nc), &fresh); err != nil {
			return nil, "", client.IgnoreNotFound(err)
		}
		if sn := inSnap[fresh.Status.NodeName]; sn != nil {
			arrived += len(disruption.Arrived(nil, sn.Pods))
		}
	}
	// The command was planned for the pods then on its candidates; while
	// no other pod has come to them or to the replacements, a replacement
	// plan holds as made. Simulating it again would only measure how a
	// second packing of the same pods differs from the first, and abandon
	// good commands over it, launching their replacements again and again.
	// A deletion is simulated again whatever arrived: the room it counted
	// on in other nodes may have been taken, and nothing was launched.
	if len(present.Candidates) == 0 || r.cmd.Static || (arrived == 0 && len(r.created) > 0) {
		return append(goes, presentInfos...), why, nil
	}
	keep, unfit := disruption.Recheck(snap, present, c.Scheduling)
	if unfit != "" {
		why = unfit
	}
	if keep == 0 && !partial {
		return nil, why, nil
	}
	return append(goes, presentInfos[:keep]...), why, nil
}

func (c *Controller) createReplacement(ctx context.Context, r *scheduling.NewNodeClaim, reason v1.DisruptionReason, replacing string) (*v1.NodeClaim, error) {
	var np v1.NodePool
	if err := c.Client.Get(ctx, client.ObjectKey{Name: r.NodePool}, &np); err != nil {
		return nil, err
	}
	nc, err := provisioning.NewNodeClaim(&np, r, c.Client.Scheme())
	if err != nil {
		return nil, err
	}
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[v1.AnnotationReplacing] = replacing
	if err := c.Client.Create(ctx, nc); err != nil {
		return nil, err
	}
	metrics.NodeClaimsCreated.WithLabelValues(strings.ToLower(string(reason)), np.Name).Inc()
	return nc, nil
}

// cacheGrace is how long a NodeClaim just created may be missing from the
// informer cache before it counts as deleted.
const cacheGrace = 10 * time.Second

// errNotInitialized: the replacements are there but not all initialized.
var errNotInitialized = errors.New("replacements not initialized")

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
			if nc.DeletionTimestamp != nil {
				return fmt.Errorf("replacement %s is being deleted", want.Name)
			}
			if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				ready++
			}
		}
		if ready == len(claims) {
			return nil
		}
		if c.Clock.Now().After(deadline) {
			return fmt.Errorf("%w after %s", errNotInitialized, c.ReadyTimeout)
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

// consolidationType is Karpenter's name for the kind of consolidation a
// command is: empty nodes deleted, one node, or several at once. Drift is
// not consolidation and has none.
func consolidationType(cmd disruption.Command) string {
	switch {
	case cmd.Reason == v1.DisruptionReasonDrifted:
		return ""
	case cmd.Reason == v1.DisruptionReasonEmpty:
		return "empty"
	case len(cmd.Candidates) > 1:
		return "multi"
	}
	return "single"
}
