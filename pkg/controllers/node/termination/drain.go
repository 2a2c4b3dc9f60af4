package termination

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// StuckAfter is how long past the end of its grace period a terminating pod
// is waited for. A pod still there by then is on a kubelet that is not
// confirming deletions (dead, or its instance gone); waiting longer would
// hold the node, its NodeClaim and a disruption budget slot for good.
const StuckAfter = time.Minute

// drain evicts the pods that must leave, one group at a time, and returns
// how many are left. The groups, in order, are Karpenter's: other pods,
// DaemonSet pods, critical pods (the system priority classes: DNS, CNI
// helpers and the like), critical DaemonSet pods; so that each group serves
// the ones before it to the end. A group is evicted once every pod of the
// groups before it is gone. Mirror pods, pods that tolerate the disrupted
// taint, finished pods and pods stuck terminating (StuckAfter) are not
// waited for.
//
// With a deadline (the NodeClaim's terminationGracePeriod), every pod is
// deleted in time for its own grace period to end by the deadline, whatever
// PDBs, do-not-disrupt and the groups say, and a pod already terminating
// that would outlive the deadline is deleted again with a shorter grace.
// Once the deadline has passed nothing is waited for.
func (c *Controller) drain(ctx context.Context, node *corev1.Node, nc *v1.NodeClaim, deadline *time.Time) (int, error) {
	now := c.Clock.Now()
	var onNode corev1.PodList
	if err := c.Client.List(ctx, &onNode, client.MatchingFields{NodeNameIndex: node.Name}); err != nil {
		return 0, err
	}
	var groups [4][]*corev1.Pod
	for i := range onNode.Items {
		pod := &onNode.Items[i]
		if !waitedFor(pod, now) {
			continue
		}
		g := 0
		if pods.IsOwnedByDaemonSet(pod) {
			g = 1
		}
		if pods.IsCritical(pod) {
			g += 2
		}
		groups[g] = append(groups[g], pod)
	}
	left := 0
	for _, g := range groups {
		left += len(g)
	}
	if deadline != nil {
		for _, g := range groups {
			for _, pod := range g {
				if err := c.hurry(ctx, pod, nc, *deadline, now); err != nil {
					return left, err
				}
			}
		}
		if !now.Before(*deadline) {
			return 0, nil // the period is up: the node goes, whoever is left
		}
	}
	for _, group := range groups {
		if len(group) == 0 {
			continue
		}
		// Largest first within the group, the order consolidation plans for.
		sort.SliceStable(group, func(i, j int) bool { return disruption.EvictFirst(group[i], group[j]) })
		for _, pod := range group {
			// do-not-disrupt pods wait for the deadline; without one the
			// drain waits for them.
			if pod.DeletionTimestamp != nil || pods.DoNotDisrupt(pod, now) || !c.refusals.due(pod.UID, now) {
				continue
			}
			if err := c.evict(ctx, node, pod, now); err != nil {
				return left, err
			}
		}
		break
	}
	return left, nil
}

// waitedFor reports a pod the drain waits to see gone.
func waitedFor(pod *corev1.Pod, now time.Time) bool {
	return !pods.IsTerminal(pod) && !staysWithNode(pod, now)
}

// staysWithNode reports a pod that is not drained and goes with the node: a
// mirror pod (the API server cannot evict it), a pod that tolerates the
// disrupted taint (it asked to stay), or one stuck terminating.
func staysWithNode(pod *corev1.Pod, now time.Time) bool {
	return pods.IsMirror(pod) || stuckTerminating(pod, now) || pods.ToleratesDisrupted(pod)
}

// stuckTerminating reports a pod whose deletion should have been confirmed
// by its kubelet StuckAfter ago. Its deletion timestamp is when its grace
// period ends.
func stuckTerminating(pod *corev1.Pod, now time.Time) bool {
	return pod.DeletionTimestamp != nil && now.Sub(pod.DeletionTimestamp.Time) > StuckAfter
}

// hurry deletes pod so that its grace period ends by deadline, once the
// deadline is within the pod's own grace period (or its deletion, already
// under way, would end after the deadline).
func (c *Controller) hurry(ctx context.Context, pod *corev1.Pod, nc *v1.NodeClaim, deadline, now time.Time) error {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.DeletionTimestamp != nil {
		// The API server can shorten a deletion's grace period, not
		// lengthen it; one second of slack keeps this from repeating.
		if !pod.DeletionTimestamp.After(deadline.Add(time.Second)) {
			return nil
		}
	} else if deadline.Sub(now) > time.Duration(grace)*time.Second {
		return nil
	}
	g := max(int64(deadline.Sub(now).Seconds()), 1)
	if err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(g)); client.IgnoreNotFound(err) != nil {
		return err
	}
	if nc != nil {
		c.Recorder.Event(nc, corev1.EventTypeWarning, "TerminationGracePeriodExpiring",
			fmt.Sprintf("Deleted pod %s/%s with a %ds grace period: the node's terminationGracePeriod ends at %s", pod.Namespace, pod.Name, g, deadline.Format(time.RFC3339)))
	}
	pod.DeletionTimestamp = &metav1.Time{Time: now.Add(time.Duration(g) * time.Second)}
	return nil
}

// evict asks the Eviction API to evict pod, so that PDBs hold. A refusal
// (429: a PDB allows no disruption now) is retried with a growing pause
// (refusals), not on every pass.
func (c *Controller) evict(ctx context.Context, node *corev1.Node, pod *corev1.Pod, now time.Time) error {
	err := c.Client.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
	switch {
	case err == nil:
		c.refusals.forget(pod.UID)
		c.Recorder.Event(pod, corev1.EventTypeNormal, "Evicted", "Evicted pod: node "+node.Name+" is terminating")
	case apierrors.IsTooManyRequests(err):
		wait := c.refusals.refused(pod.UID, now)
		// The event's text stays the same from one retry to the next, so
		// the recorder folds the retries into one event with a count; the
		// pause goes to the log.
		c.Recorder.Event(node, corev1.EventTypeWarning, "FailedDraining", fmt.Sprintf("Failed to evict pod %s/%s: %v", pod.Namespace, pod.Name, err))
		log.FromContext(ctx).V(1).Info("eviction refused", "pod", pod.Namespace+"/"+pod.Name, "retry", wait.String(), "error", err.Error())
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		c.refusals.forget(pod.UID)
	default:
		return fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// Eviction retries after a PDB refusal start at refusalFirst and double up
// to refusalMax: a PDB frees up as pods elsewhere become ready, which takes
// seconds, and asking every second only loads the API server.
const (
	refusalFirst = time.Second
	refusalMax   = 30 * time.Second
)

// refusals remembers, per pod, when its eviction may be asked again.
type refusals struct {
	mu   sync.Mutex
	next map[types.UID]refusal
}

type refusal struct {
	at   time.Time
	wait time.Duration
}

func (r *refusals) due(uid types.UID, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !now.Before(r.next[uid].at)
}

// refused records a refusal at now and returns the pause before the next try.
func (r *refusals) refused(uid types.UID, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.next = map[types.UID]refusal{}
	}
	// Entries of pods that went away without a last word: drop the stale.
	for k, v := range r.next {
		if now.Sub(v.at) > 10*refusalMax {
			delete(r.next, k)
		}
	}
	wait := refusalFirst
	if prev, ok := r.next[uid]; ok {
		wait = min(2*prev.wait, refusalMax)
	}
	r.next[uid] = refusal{at: now.Add(wait), wait: wait}
	return wait
}

func (r *refusals) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.next, uid)
}
