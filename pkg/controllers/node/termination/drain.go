package termination

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// drain evicts the pods that must leave and returns how many are left.
// DaemonSet pods, mirror pods and pods that tolerate the disrupted taint
// stay; they go with the node. Critical pods (the system priority classes:
// DNS, CNI helpers and the like) are evicted only once every other pod that
// must leave is gone, so they serve those pods to the end.
func (c *Controller) drain(ctx context.Context, node *corev1.Node, nc *v1.NodeClaim, deadline *time.Time) (int, error) {
	var onNode corev1.PodList
	if err := c.Client.List(ctx, &onNode, client.MatchingFields{NodeNameIndex: node.Name}); err != nil {
		return 0, err
	}
	var leaving []*corev1.Pod
	others := 0
	for i := range onNode.Items {
		pod := &onNode.Items[i]
		if pods.IsTerminal(pod) || !mustLeave(pod) {
			continue
		}
		leaving = append(leaving, pod)
		if !pods.IsCritical(pod) {
			others++
		}
	}
	// Largest first within each group, the order consolidation plans for.
	sort.SliceStable(leaving, func(i, j int) bool { return disruption.EvictFirst(leaving[i], leaving[j]) })
	for _, pod := range leaving {
		if pod.DeletionTimestamp != nil {
			continue
		}
		// Near the deadline, delete the pod so its own grace period ends by
		// the deadline, whatever PDBs, do-not-disrupt and the order say.
		if deadline != nil {
			grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
			if pod.Spec.TerminationGracePeriodSeconds != nil {
				grace = *pod.Spec.TerminationGracePeriodSeconds
			}
			left := deadline.Sub(c.Clock.Now())
			if left <= time.Duration(grace)*time.Second {
				g := int64(left.Seconds())
				if g < 1 {
					g = 1
				}
				if err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(g)); client.IgnoreNotFound(err) != nil {
					return len(leaving), err
				}
				if nc != nil {
					c.Recorder.Event(nc, corev1.EventTypeWarning, "TerminationGracePeriodExpiring",
						fmt.Sprintf("Deleted pod %s/%s with a %ds grace period: the node's terminationGracePeriod ends at %s", pod.Namespace, pod.Name, g, deadline.Format(time.RFC3339)))
				}
				continue
			}
		}
		if pods.IsCritical(pod) && others > 0 {
			continue
		}
		// do-not-disrupt pods wait for the deadline; without one the drain waits for them.
		if pods.DoNotDisrupt(pod, c.Clock.Now()) {
			continue
		}
		err := c.Client.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
		switch {
		case err == nil:
			c.Recorder.Event(pod, corev1.EventTypeNormal, "Evicted", "Evicted pod: node "+node.Name+" is terminating")
		case apierrors.IsTooManyRequests(err):
			// A PDB does not allow it now; try again.
			c.Recorder.Event(node, corev1.EventTypeWarning, "FailedDraining", fmt.Sprintf("Failed to evict pod %s/%s: %v", pod.Namespace, pod.Name, err))
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			return len(leaving), fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return len(leaving), nil
}

// mustLeave reports a pod the drain waits for. The others are never
// evicted and never leave before the node does.
func mustLeave(pod *corev1.Pod) bool {
	if pods.IsOwnedByNode(pod) {
		return false
	}
	for _, t := range pod.Spec.Tolerations {
		if t.ToleratesTaint(nopLogger, &v1.DisruptedNoScheduleTaint, false) {
			return false
		}
	}
	return true
}
