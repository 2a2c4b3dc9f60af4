package state

import (
	"context"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// moves reports the pods of nodes being deleted that are planned for
// elsewhere now (Moves), as of this moment's nodes, NodeClaims and PDBs.
func (c *Cluster) moves(ctx context.Context) (func(*corev1.Pod) bool, error) {
	deleting, err := c.deletingNodes(ctx)
	if err != nil {
		return nil, err
	}
	if len(deleting) == 0 {
		return func(*corev1.Pod) bool { return false }, nil
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.Client.List(ctx, &pdbs); err != nil {
		return nil, err
	}
	now := c.clock().Now()
	return func(p *corev1.Pod) bool { return Moves(p, deleting, pdbs.Items, now) }, nil
}

// deletingNodes are the nodes whose NodeClaim or Node is being deleted.
func (c *Cluster) deletingNodes(ctx context.Context) (map[string]bool, error) {
	claims, err := c.NodeClaims(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil && nc.Status.NodeName != "" {
			out[nc.Status.NodeName] = true
		}
	}
	for _, n := range nodes {
		if n.DeletionTimestamp != nil {
			out[n.Name] = true
		}
	}
	return out, nil
}

// Moving are unbound copies of the pods that Moves reports: they are
// planned for as soon as their node is going, as Karpenter plans for them,
// not one by one as the drain evicts them (an expired node's five pods
// behind a PDB got two nodes that way, and replicas stayed down until each
// found one).
func Moving(all []*corev1.Pod, moves func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range all {
		if !moves(p) {
			continue
		}
		cp := *p
		cp.Spec = *p.Spec.DeepCopy()
		cp.Spec.NodeName = ""
		out = append(out, &cp)
	}
	return out
}

// Moves reports a pod of a node being deleted (deleting) that will need a
// node elsewhere now, by Karpenter's rule: an active pod, or a StatefulSet
// pod still terminating (its replacement is made only once it is gone),
// that the drain will evict. Not the node's own pods (DaemonSet, mirror),
// nor those that tolerate the disrupted taint and stay to the end, nor
// those the drain cannot move for now: an active do-not-disrupt, or a PDB
// that never allows an eviction (maxUnavailable 0, minAvailable 100%) or
// more than one PDB, which the Eviction API refuses. Capacity launched for
// those would wait, and be kept from consolidation, for as long as they
// hold the node.
func Moves(p *corev1.Pod, deleting map[string]bool, pdbs []policyv1.PodDisruptionBudget, now time.Time) bool {
	if !deleting[p.Spec.NodeName] || pods.IsOwnedByNode(p) || pods.IsTerminal(p) || pods.ToleratesDisrupted(p) {
		return false
	}
	if p.DeletionTimestamp != nil {
		return ownedByStatefulSet(p)
	}
	return !pods.DoNotDisrupt(p, now) && !evictionRefused(p, pdbs)
}

func ownedByStatefulSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "StatefulSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// evictionRefused reports a pod whose eviction the Eviction API refuses
// until its PDBs change: more than one PDB selects it, or one never allows
// a disruption. A PDB that lets unhealthy pods go always (AlwaysAllow)
// does not hold an unready pod.
func evictionRefused(p *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) bool {
	matching := pods.PDBsOf(p, pdbs)
	if len(matching) > 1 {
		return true
	}
	for _, pdb := range matching {
		if pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow && unready(p) {
			return false
		}
		if neverAllows(pdb) {
			return true
		}
	}
	return false
}

// neverAllows reports a PDB that allows no disruption whatever the pods'
// health: maxUnavailable 0 or "0%", or minAvailable "100%".
func neverAllows(pdb *policyv1.PodDisruptionBudget) bool {
	if u := pdb.Spec.MaxUnavailable; u != nil {
		if (u.Type == intstr.Int && u.IntVal == 0) || (u.Type == intstr.String && u.StrVal == "0%") {
			return true
		}
	}
	a := pdb.Spec.MinAvailable
	return a != nil && a.Type == intstr.String && a.StrVal == "100%"
}

// unready reports a pod whose Ready condition is False.
func unready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionFalse
		}
	}
	return false
}

// Disrupting is snap as it will be once nodes are deleted: each is marked
// for deletion, so it takes no new pods, and on the moving ones, the pods
// that Moves reports are pending copies, which claim room elsewhere as any
// pending pod does. The disruption loop applies it to the nodes of the
// commands it has under way, which are not being deleted yet, so that a
// second command does not plan into the room the first one's pods will
// take. snap's nodes are not changed: the marked ones are copies.
func Disrupting(snap scheduling.Snapshot, nodes, moving map[string]bool, pdbs []policyv1.PodDisruptionBudget, now time.Time) scheduling.Snapshot {
	out := snap
	out.Nodes = make([]*scheduling.Node, len(snap.Nodes))
	out.Pods = append([]*corev1.Pod(nil), snap.Pods...)
	moves := func(p *corev1.Pod) bool { return Moves(p, moving, pdbs, now) }
	for i, n := range snap.Nodes {
		out.Nodes[i] = n
		if !nodes[n.Name] {
			continue
		}
		cp := *n
		cp.MarkedForDeletion = true
		cp.Pods = nil
		for _, p := range n.Pods {
			if !moves(p) {
				cp.Pods = append(cp.Pods, p)
			}
		}
		out.Pods = append(out.Pods, Moving(n.Pods, moves)...)
		out.Nodes[i] = &cp
	}
	return out
}
