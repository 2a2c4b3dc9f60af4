package disruption

import (
	"fmt"

	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// PodKey names a pod across its life: a recreated pod is another pod.
func PodKey(p *corev1.Pod) string {
	return p.Namespace + "/" + p.Name + "/" + string(p.UID)
}

// Arrived are the pods on a node that a command was not planned for
// (planned holds the PodKeys it moved): pods kube-scheduler bound there
// between the decision and the taint, or that tolerate the taint. The
// node's own DaemonSet and mirror pods and finished pods never count.
func Arrived(planned map[string]bool, onNode []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range onNode {
		if !planned[PodKey(p)] && !pods.IsOwnedByNode(p) && !pods.IsTerminal(p) && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// Recheck says how many of a command's candidates may still go, asked just
// before they are drained, and why the others may not ("" when all may):
// on a fresh snapshot in which the candidates carry the disrupted taint,
// the pods that arrived on them meanwhile are there, pending pods keep
// their claims, and the command's replacements, now initialized, are
// capacity. Every pod of a candidate that goes must still fit on the other
// nodes; needing more capacity would be a different plan, made for pods
// the command was not sized for.
//
// A replacement, or the deletion of one node, goes whole or not at all: 0
// or every candidate. A deletion of several nodes was decided one node at
// a time, each against the room the ones before it left, and is checked
// the same way; it goes ahead with the candidates before the first that
// no longer fits. Abandoning it whole, as Karpenter does, cost the most in
// churn: in an hour of the scale benchmark's (run 7) it abandoned 16
// deletions of 2 to 153 nodes, each for want of one more node. The
// candidates kept back only add room, as they are released.
func Recheck(snap scheduling.Snapshot, cmd Command, sched scheduling.Options) (int, string) {
	cluster := scheduling.NewCluster(snap, sched)
	names := make([]string, 0, len(cmd.Candidates))
	for _, c := range cmd.Candidates {
		names = append(names, c.Node)
	}
	if len(cmd.Replacements) > 0 || len(names) < 2 {
		if why := unfit(cluster, names...); why != "" {
			return 0, why
		}
		return len(names), ""
	}
	for i, name := range names {
		if why := unfit(cluster, name); why != "" {
			return i, why
		}
		if i == len(names)-1 {
			break
		}
		if _, err := cluster.Remove(name); err != nil {
			return i, err.Error()
		}
	}
	return len(names), ""
}

// unfit says why the nodes' pods would not all fit on the other nodes of
// cluster (and the replacements already in it); empty when they would.
func unfit(cluster *scheduling.Cluster, names ...string) string {
	r, err := cluster.TryRemove(names...)
	switch {
	case err != nil:
		return err.Error()
	case len(r.Unschedulable) > 0:
		u := r.Unschedulable[0]
		return fmt.Sprintf("pod %s/%s would no longer fit elsewhere: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)
	case len(r.Replacements) > 0:
		why := fmt.Sprintf("its pods no longer fit on the other nodes and the replacements; %d more node(s) would be needed", len(r.Replacements))
		if ps := r.Replacements[0].Pods; len(ps) > 0 {
			why += fmt.Sprintf(", for pod %s/%s first", ps[0].Namespace, ps[0].Name)
		}
		return why
	}
	return ""
}
