// Package metrics serves the cluster-state metrics Karpenter's dashboards
// read (nodes' allocatable and requests, pods' state, NodePools' usage and
// limits) and observes pods' startup and bind times.
//
// The gauges are computed when Prometheus scrapes, from the informer cache:
// no controller keeps series in step with the cluster, so none can go stale
// when an object is deleted while Joiner is down, and a cluster nobody
// scrapes costs nothing. DISABLE_CLUSTER_STATE_OBSERVABILITY turns it off,
// as it turns off Karpenter's.
package metrics

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/state"
)

// Unowned is the nodepool label of a node no NodePool owns, as in
// Karpenter's dashboards ("nodepool!=\"N/A\"").
const Unowned = "N/A"

// nodeDimensions are the node labels every node series carries, named as
// Karpenter names them: the dashboards filter on these.
var nodeDimensions = []struct{ key, name string }{
	{corev1.LabelArchStable, "arch"},
	{v1.LabelCapacityType, "capacity_type"},
	{corev1.LabelInstanceTypeStable, "instance_type"},
	{corev1.LabelTopologyZone, "zone"},
	{corev1.LabelOSStable, "os"},
	{corev1.LabelTopologyRegion, "region"},
}

func nodeLabelNames() []string {
	out := []string{"node_name", "nodepool", "resource_type"}
	for _, d := range nodeDimensions {
		out = append(out, d.name)
	}
	return out
}

var (
	nodesAllocatable = prometheus.NewDesc("karpenter_nodes_allocatable",
		"Resources a node can give pods (its allocatable), by node, NodePool, resource type and the node's well-known labels.", nodeLabelNames(), nil)
	nodesPodRequests = prometheus.NewDesc("karpenter_nodes_total_pod_requests",
		"Resources the node's pods request, DaemonSet pods excluded, by node, NodePool, resource type and the node's well-known labels.", nodeLabelNames(), nil)
	nodesDaemonRequests = prometheus.NewDesc("karpenter_nodes_total_daemon_requests",
		"Resources the node's DaemonSet pods request, by node, NodePool, resource type and the node's well-known labels.", nodeLabelNames(), nil)
	podsState = prometheus.NewDesc("karpenter_pods_state",
		"One series of value 1 per pod, labelled with where it runs, its phase, and whether it is scheduled and ready.",
		[]string{"name", "namespace", "owner", "node", "nodepool", "zone", "arch", "capacity_type", "instance_type", "phase", "scheduled", "ready"}, nil)
	nodePoolsUsage = prometheus.NewDesc("karpenter_nodepools_usage",
		"Capacity of the NodePool's nodes, by NodePool and resource type.", []string{"nodepool", "resource_type"}, nil)
	nodePoolsLimit = prometheus.NewDesc("karpenter_nodepools_limit",
		"The NodePool's spec.limits, by NodePool and resource type.", []string{"nodepool", "resource_type"}, nil)
)

// State is the scrape-time collector of the cluster-state gauges.
type State struct {
	// Reader is the manager's cached client.
	Reader client.Reader
	// Cluster reads the cache's nodes and pods in place.
	Cluster *state.Cluster
	// Timeout bounds one scrape's reads; a cache that has not synced yet
	// makes the scrape skip these series rather than hang.
	Timeout time.Duration
}

// Describe implements prometheus.Collector.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodesAllocatable, nodesPodRequests, nodesDaemonRequests, podsState, nodePoolsUsage, nodePoolsLimit} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *State) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := scrapeContext(s.Timeout, 5*time.Second)
	defer cancel()
	// The cache's own nodes and pods, read and never written: a copy of
	// 10,000 pods per scrape was most of a scrape's memory.
	nodes, err := s.Cluster.Nodes(ctx)
	if err != nil {
		return
	}
	podList, err := s.Cluster.Pods(ctx)
	if err != nil {
		return
	}
	var pools v1.NodePoolList
	if s.Reader.List(ctx, &pools) != nil {
		return
	}
	byName := make(map[string]*corev1.Node, len(nodes))
	usage := map[string]corev1.ResourceList{}
	for _, n := range nodes {
		byName[n.Name] = n
		if pool := n.Labels[v1.LabelNodePool]; pool != "" {
			add(usage, pool, n.Status.Capacity)
		}
	}
	podRequests := map[string]corev1.ResourceList{}
	daemonRequests := map[string]corev1.ResourceList{}
	for _, p := range podList {
		s.podState(ch, p, byName[p.Spec.NodeName])
		if p.Spec.NodeName == "" || pods.IsTerminal(p) {
			continue
		}
		if pods.IsOwnedByDaemonSet(p) {
			add(daemonRequests, p.Spec.NodeName, pods.Requests(p))
		} else {
			add(podRequests, p.Spec.NodeName, pods.Requests(p))
		}
	}
	for _, n := range byName {
		dims := nodeValues(n)
		emit(ch, nodesAllocatable, n.Status.Allocatable, n.Name, dims)
		// Every allocatable resource gets a requests series, zero when
		// nothing asks for it: the dashboards divide one by the other.
		for _, d := range []struct {
			desc *prometheus.Desc
			of   map[string]corev1.ResourceList
		}{{nodesPodRequests, podRequests}, {nodesDaemonRequests, daemonRequests}} {
			reqs := corev1.ResourceList{}
			for r := range n.Status.Allocatable {
				reqs[r] = d.of[n.Name][r]
			}
			emit(ch, d.desc, reqs, n.Name, dims)
		}
	}
	for i := range pools.Items {
		p := &pools.Items[i]
		for r, q := range usage[p.Name] {
			ch <- prometheus.MustNewConstMetric(nodePoolsUsage, prometheus.GaugeValue, q.AsApproximateFloat64(), p.Name, resourceType(r))
		}
		for r, q := range p.Spec.Limits {
			ch <- prometheus.MustNewConstMetric(nodePoolsLimit, prometheus.GaugeValue, q.AsApproximateFloat64(), p.Name, resourceType(r))
		}
	}
}

func (s *State) podState(ch chan<- prometheus.Metric, p *corev1.Pod, node *corev1.Node) {
	owner := ""
	if len(p.OwnerReferences) > 0 {
		o := p.OwnerReferences[0]
		owner = o.Kind + "/" + o.Name
	}
	var labels map[string]string
	if node != nil {
		labels = node.Labels
	}
	pool := labels[v1.LabelNodePool]
	if node != nil && pool == "" {
		pool = Unowned
	}
	ready, scheduled := "false", "false"
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodReady:
			ready = "true"
		case corev1.PodScheduled:
			scheduled = "true"
		}
	}
	ch <- prometheus.MustNewConstMetric(podsState, prometheus.GaugeValue, 1,
		p.Name, p.Namespace, owner, p.Spec.NodeName, pool, labels[corev1.LabelTopologyZone], labels[corev1.LabelArchStable],
		labels[v1.LabelCapacityType], labels[corev1.LabelInstanceTypeStable], string(p.Status.Phase), scheduled, ready)
}

// nodeValues are the node's nodepool and well-known label values, in
// nodeLabelNames' order after node_name and resource_type.
func nodeValues(n *corev1.Node) []string {
	pool := n.Labels[v1.LabelNodePool]
	if pool == "" {
		pool = Unowned
	}
	out := []string{pool}
	for _, d := range nodeDimensions {
		out = append(out, n.Labels[d.key])
	}
	return out
}

func emit(ch chan<- prometheus.Metric, desc *prometheus.Desc, rl corev1.ResourceList, node string, dims []string) {
	for r, q := range rl {
		values := append([]string{node, dims[0], resourceType(r)}, dims[1:]...)
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, q.AsApproximateFloat64(), values...)
	}
}

// resourceType is a resource's name as a label value: lower case, with the
// characters PromQL users would have to quote turned into underscores
// ("ephemeral_storage", "nvidia_com_gpu").
func resourceType(r corev1.ResourceName) string {
	return labelSafe.Replace(strings.ToLower(string(r)))
}

// labelSafe is built once: a scrape names a resource for every pod and
// node, and a replacer per name was 7 MB of a scrape at 10,000 pods.
var labelSafe = strings.NewReplacer("-", "_", ".", "_", "/", "_")

func add(into map[string]corev1.ResourceList, key string, rl corev1.ResourceList) {
	sum := into[key]
	if sum == nil {
		sum = corev1.ResourceList{}
		into[key] = sum
	}
	for r, q := range rl {
		total := sum[r]
		total.Add(q)
		sum[r] = total
	}
}

// scrapeContext bounds one scrape's reads: timeout, or fallback when zero.
func scrapeContext(timeout, fallback time.Duration) (context.Context, context.CancelFunc) {
	if timeout == 0 {
		timeout = fallback
	}
	return context.WithTimeout(context.Background(), timeout)
}
