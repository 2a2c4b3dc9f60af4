package simulate

import (
	"fmt"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
)

// A run may start from a cluster's nodes (Nodes in -f, as `joiner
// simulate record` writes them): each is a node of the NodePool its
// karpenter.sh/nodepool label names, of the instance type, zone and
// capacity type its labels give, initialized at the start. The
// workloads' pods start pending and kube-scheduler places them on these
// nodes first, as they were before; consolidation, drift and expiry then
// treat them as any node of their pool. Their age is not known, so their
// expireAfter runs from the start.

// startNodes makes the manifests' Nodes the run's first nodes, or says
// which cannot be and why.
func (s *sim) startNodes(nodes []*corev1.Node) error {
	for _, node := range nodes {
		if s.nodes[node.Name] != nil {
			return fmt.Errorf("Node %s is given twice; give each node once", node.Name)
		}
		n, err := s.startNode(node)
		if err != nil {
			return fmt.Errorf("Node %s: %w", node.Name, err)
		}
		s.nodes[n.name] = n
		s.live++
		s.rec.peak = max(s.rec.peak, s.live)
		if after := s.pools[n.pool].Spec.Template.Spec.ExpireAfter; !after.IsNever() {
			s.after(*after.Duration, func() { s.expire(n) })
		}
	}
	return nil
}

func (s *sim) startNode(node *corev1.Node) (*simNode, error) {
	pool := node.Labels[v1.LabelNodePool]
	if pool == "" || s.pools[pool] == nil {
		return nil, fmt.Errorf("label %s is %q, not a NodePool of the manifests; a run starts only with nodes a NodePool of -f manages: add the NodePool, or remove the Node", v1.LabelNodePool, pool)
	}
	typ, zone, ct := node.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelTopologyZone], node.Labels[v1.LabelCapacityType]
	var it *cloudprovider.InstanceType
	for _, t := range s.poolTypes[pool] {
		if t.Name == typ {
			it = t
		}
	}
	if it == nil {
		return nil, fmt.Errorf("label %s is %q, not an instance type of the catalog's region; fix the label, or pass the cluster's --region", corev1.LabelInstanceTypeStable, typ)
	}
	var offer *cloudprovider.Offering
	for i, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == ct && !o.Limited() {
			offer = &it.Offerings[i]
		}
	}
	if offer == nil {
		return nil, fmt.Errorf("labels %s %q and %s %q name no offering of %s in the catalog's region; pass the cluster's --region and --zones, and give on-demand or spot (reserved capacity is not simulated)",
			corev1.LabelTopologyZone, zone, v1.LabelCapacityType, ct, typ)
	}
	n := &simNode{name: node.Name, pool: pool, it: it, offering: *offer, launched: s.start, readyAt: s.start, lastEvent: s.start,
		pods: map[string]*simPod{}, hash: s.poolHash[pool], classPrint: s.classPrints[s.classOf(pool)],
		labels: map[string]string{}, taints: append([]corev1.Taint(nil), node.Spec.Taints...)}
	// The type's labels (arch, category...) are on every node of it,
	// whether or not the manifest repeats them.
	for k, v := range it.Labels {
		n.labels[k] = v
	}
	for k, v := range node.Labels {
		n.labels[k] = v
	}
	n.labels[corev1.LabelHostname] = node.Name
	return n, nil
}
