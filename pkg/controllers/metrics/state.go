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
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
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
	nodesAllocatable = newFamily("karpenter_nodes_allocatable",
		"Resources a node can give pods (its allocatable), by node, NodePool, resource type and the node's well-known labels.", nodeLabelNames()...)
	nodesPodRequests = newFamily("karpenter_nodes_total_pod_requests",
		"Resources the node's pods request, DaemonSet pods excluded, by node, NodePool, resource type and the node's well-known labels.", nodeLabelNames()...)
	nodesDaemonRequests = newFamily("karpenter_nodes_total_daemon_requests",
		"Resources the node's DaemonSet pods request, by node, NodePool, resource type and the node's well-known labels.", nodeLabelNames()...)
	podsState = newFamily("karpenter_pods_state",
		"One series of value 1 per pod, labelled with where it runs, its phase, whether it is bound and ready, and whether a NodePool owns its node.",
		"name", "namespace", "owner", "node", "nodepool", "zone", "arch", "capacity_type", "instance_type", "phase", "scheduled", "ready", "managed")
	nodePoolsUsage = newFamily("karpenter_nodepools_usage",
		"Capacity of the NodePool's nodes, by NodePool and resource type.", "nodepool", "resource_type")
	nodePoolsLimit = newFamily("karpenter_nodepools_limit",
		"The NodePool's spec.limits, by NodePool and resource type.", "nodepool", "resource_type")
	nodePoolsCost = newFamily("karpenter_nodepools_cost_total",
		"What the NodePool's launched NodeClaims cost an hour on the bill, in $/h: their offerings' prices (NodeOverlays included) less what the account's Reserved Instances and Savings Plans cover; an estimate, not a bill.", "nodepool")
	nodePoolsEffectiveCost = newFamily("joiner_nodepools_effective_cost",
		"What the NodePool's launched NodeClaims cost an hour under the account's Reserved Instances and Savings Plans, in $/h (karpenter_nodepools_cost_total under Joiner's name).", "nodepool")
	nodePoolsListCost = newFamily("joiner_nodepools_list_cost",
		"What the NodePool's launched NodeClaims would cost an hour at their offerings' list prices, with no commitment applied, in $/h.", "nodepool")
	nodePoolsSpendCap = newFamily("joiner_nodepools_spend_cap",
		"The NodePool's spend cap (annotation joiner.sh/hourly-spend-cap), in $/h; no series for a pool without one.", "nodepool")
	commitmentUtilization = newFamily("joiner_commitments_utilization",
		"The share of a Reserved Instance's or Savings Plan's commitment the cluster's NodeClaims use, 0 to 1, by commitment ID and kind (reserved-instance, savings-plan).", "commitment", "kind")
)

// State is the scrape-time collector of the cluster-state gauges.
type State struct {
	// Reader is the manager's cached client.
	Reader client.Reader
	// Cluster reads the cache's nodes, pods and NodeClaims in place.
	Cluster *state.Cluster
	// Provider prices the NodeClaims for the cost gauge, as planning
	// prices them (overlaid); nil leaves the gauge out.
	Provider cloudprovider.CloudProvider
	// Timeout bounds one scrape's reads; a cache that has not synced yet
	// makes the scrape skip these series rather than hang.
	Timeout time.Duration
}

// Describe implements prometheus.Collector.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range []*family{nodesAllocatable, nodesPodRequests, nodesDaemonRequests, podsState, nodePoolsUsage, nodePoolsLimit, nodePoolsCost,
		nodePoolsEffectiveCost, nodePoolsListCost, nodePoolsSpendCap, commitmentUtilization} {
		ch <- f.desc
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
	lp := pairs{}
	byName := make(map[string]*corev1.Node, len(nodes))
	usage := map[string]corev1.ResourceList{}
	for _, n := range nodes {
		byName[n.Name] = n
		if pool := n.Labels[v1.LabelNodePool]; pool != "" {
			add(usage, pool, n.Status.Capacity)
		}
	}
	// Summed in integers, not ResourceLists: a ResourceList per pod was
	// a third of a scrape's allocation at 10,000 pods.
	podRequests := map[string]resources.Resources{}
	daemonRequests := map[string]resources.Resources{}
	for _, p := range podList {
		podState(ch, lp, p, byName[p.Spec.NodeName])
		if p.Spec.NodeName == "" || pods.IsTerminal(p) {
			continue
		}
		into := podRequests
		if pods.IsOwnedByDaemonSet(p) {
			into = daemonRequests
		}
		r := resources.PodRequests(p)
		r.Pods = 0 // a pod asks for no pods resource here, as in Karpenter's metric
		into[p.Spec.NodeName] = into[p.Spec.NodeName].Add(r)
	}
	for _, n := range byName {
		dims := nodeValues(n)
		for r, q := range n.Status.Allocatable {
			values := []string{n.Name, dims[0], resourceType(r)}
			values = append(values, dims[1:]...)
			ch <- nodesAllocatable.series(lp, q.AsApproximateFloat64(), values...)
			// Every allocatable resource gets a requests series, zero when
			// nothing asks for it: the dashboards divide one by the other.
			ch <- nodesPodRequests.series(lp, asFloat(r, podRequests[n.Name].Of(r)), values...)
			ch <- nodesDaemonRequests.series(lp, asFloat(r, daemonRequests[n.Name].Of(r)), values...)
		}
	}
	for i := range pools.Items {
		p := &pools.Items[i]
		for r, q := range usage[p.Name] {
			ch <- nodePoolsUsage.series(lp, q.AsApproximateFloat64(), p.Name, resourceType(r))
		}
		for r, q := range p.Spec.Limits {
			ch <- nodePoolsLimit.series(lp, q.AsApproximateFloat64(), p.Name, resourceType(r))
		}
	}
	s.collectCost(ctx, ch, lp, pools.Items)
}

// collectCost sums each NodePool's launched NodeClaims at their prices on
// the bill (state.Charges): karpenter_nodepools_cost_total and
// joiner_nodepools_effective_cost at the effective prices the account's
// commitments make, joiner_nodepools_list_cost at list. A NodeClaim being
// deleted still counts: its instance is billed until it is gone. One whose
// offering the pool no longer lists (a type dropped from its
// requirements) counts nothing, as it cannot be priced. It also gives
// each commitment's utilisation and each pool's spend cap.
func (s *State) collectCost(ctx context.Context, ch chan<- prometheus.Metric, lp pairs, pools []v1.NodePool) {
	if s.Provider == nil {
		return
	}
	claims, err := s.Cluster.NodeClaims(ctx)
	if err != nil {
		return
	}
	var bill cloudprovider.Bill
	if b, ok := s.Provider.(cloudprovider.Biller); ok {
		// Unreadable, the bill is list prices: the gauges say so
		// (utilisation left out) rather than go missing.
		bill, _ = b.Bill(ctx)
	}
	for _, u := range bill.Commitments {
		if u.Total > 0 {
			ch <- commitmentUtilization.series(lp, u.Used/u.Total, u.ID, u.Kind)
		}
	}
	byPool := map[string][]*v1.NodeClaim{}
	for _, nc := range claims {
		if pool := nc.Labels[v1.LabelNodePool]; pool != "" && nc.Labels[corev1.LabelInstanceTypeStable] != "" {
			byPool[pool] = append(byPool[pool], nc)
		}
	}
	for i := range pools {
		np := &pools[i]
		var list, effective float64
		if len(byPool[np.Name]) > 0 {
			its, err := s.Provider.InstanceTypes(ctx, np)
			if err != nil {
				continue
			}
			for _, nc := range byPool[np.Name] {
				c := state.Charges(nc, its, bill.Effective)
				list += c.List
				effective += c.Effective
			}
		}
		ch <- nodePoolsCost.series(lp, effective, np.Name)
		ch <- nodePoolsEffectiveCost.series(lp, effective, np.Name)
		ch <- nodePoolsListCost.series(lp, list, np.Name)
		if dollars, ok, err := spendcap.Of(np); ok && err == nil {
			ch <- nodePoolsSpendCap.series(lp, dollars, np.Name)
		}
	}
}

// podState is a pod's karpenter_pods_state series, labelled as
// Karpenter's: owner is the first owner's path as its selfLink was
// ("/apis/apps/v1/namespaces/default/replicasets/web-7d4f"), scheduled
// says the pod is bound to a node, nodepool is empty on a node no
// NodePool owns, and managed says whether one does.
func podState(ch chan<- prometheus.Metric, lp pairs, p *corev1.Pod, node *corev1.Node) {
	owner := ""
	if len(p.OwnerReferences) > 0 {
		o := p.OwnerReferences[0]
		owner = fmt.Sprintf("/apis/%s/namespaces/%s/%ss/%s", o.APIVersion, p.Namespace, strings.ToLower(o.Kind), o.Name)
	}
	var labels map[string]string
	if node != nil {
		labels = node.Labels
	}
	pool := labels[v1.LabelNodePool]
	ready := "false"
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = "true"
		}
	}
	ch <- podsState.series(lp, 1,
		p.Name, p.Namespace, owner, p.Spec.NodeName, pool, labels[corev1.LabelTopologyZone], labels[corev1.LabelArchStable],
		labels[v1.LabelCapacityType], labels[corev1.LabelInstanceTypeStable], string(p.Status.Phase),
		strconv.FormatBool(p.Spec.NodeName != ""), ready, strconv.FormatBool(pool != ""))
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

// asFloat is an amount in resources.Resources' units (millicores for CPU)
// as the metric gives it: cores, bytes, counts.
func asFloat(name corev1.ResourceName, v int64) float64 {
	if name == corev1.ResourceCPU {
		return float64(v) / 1000
	}
	return float64(v)
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
