package simulate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/kubesched"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pendingAdded is a pod that became pending: kube-scheduler tries it at
// once, and it opens or extends the provisioner's batch.
func (s *sim) pendingAdded() {
	s.queueBind()
	if !s.batchOpen {
		s.batchOpen, s.batchFirst = true, s.now
		s.after(s.cfg.Timing.BatchIdle, s.batchCheck)
	}
	s.batchLast = s.now
}

// batchCheck closes the batch once no pod arrived for BatchIdle, or
// BatchMax after it opened, as the controller's batcher does.
func (s *sim) batchCheck() {
	t := s.cfg.Timing
	closeAt := s.batchLast.Add(t.BatchIdle)
	if limit := s.batchFirst.Add(t.BatchMax); limit.Before(closeAt) {
		closeAt = limit
	}
	if s.now.Before(closeAt) {
		s.at(closeAt, s.batchCheck)
		return
	}
	s.batchOpen = false
	s.provision()
}

// snapshot is the cluster as the controller's state cache would show it:
// pending pods, nodes (in-flight ones too) with their pods, the NodePools
// with what they use, and the commands under way.
func (s *sim) snapshot(pending []*simPod) scheduling.Snapshot {
	snap := scheduling.Snapshot{DaemonSets: s.daemonSets, Nominated: map[string]string{}, Namespaces: s.namespaces, Volumes: s.volumeUsage()}
	for _, p := range pending {
		snap.Pods = append(snap.Pods, p.view)
		if p.nominated != "" {
			if n := s.nodes[p.nominated]; n != nil && !n.gone && !n.deleting {
				snap.Nominated[p.key] = n.name
			}
		}
	}
	use := map[string]resources.Resources{}
	count := map[string]int64{}
	for _, n := range s.liveNodes() {
		snap.Nodes = append(snap.Nodes, s.schedulingNode(n))
		use[n.pool] = use[n.pool].Add(resources.FromResourceList(n.it.Capacity))
		count[n.pool]++
	}
	var key strings.Builder
	for _, name := range sortedKeys(s.pools) {
		rl := use[name].ResourceList()
		rl["nodes"] = *resource.NewQuantity(count[name], resource.DecimalSI)
		np := scheduling.NodePool{NodePool: s.pools[name], InstanceTypes: s.typesFor(name), InUse: rl}
		if s.isStatic(name) {
			snap.Static = append(snap.Static, np)
		} else {
			snap.NodePools = append(snap.NodePools, np)
		}
		fmt.Fprintf(&key, "%s %p %d %d %s;", name, s.pools[name], s.typesGen, s.daemonGen, resources.ListString(rl))
	}
	snap, billKey := s.withCommitments(snap)
	key.WriteString(billKey)
	for _, o := range s.shortNow() {
		fmt.Fprintf(&key, "%v;", o)
	}
	// What every plan of this snapshot shares (pools, types, DaemonSets)
	// is worked out once for as long as none of it changes, rather than
	// in each of a pass's hundreds of trial plans.
	if key.String() != s.sharedKey {
		s.sharedKey = key.String()
		s.shared = scheduling.Share(scheduling.Snapshot{NodePools: snap.NodePools, DaemonSets: snap.DaemonSets})
	}
	snap.Shared = s.shared
	return snap
}

// shortNow are the offerings the planner sees as unavailable now, sorted.
func (s *sim) shortNow() []offering {
	var out []offering
	for o, until := range s.unavailable {
		if s.now.Before(until) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out
}

// typesFor is pool's types with the offerings a launch found short marked
// unavailable, as the controller's cache marks them.
func (s *sim) typesFor(pool string) []*cloudprovider.InstanceType {
	types := s.poolTypes[pool]
	if len(s.unavailable) == 0 {
		return types
	}
	out := make([]*cloudprovider.InstanceType, len(types))
	for i, it := range types {
		out[i] = it
		var offers []cloudprovider.Offering
		changed := false
		for _, o := range it.Offerings {
			if until, ok := s.unavailable[offering{it.Name, o.Zone, o.CapacityType}]; ok && s.now.Before(until) && o.Available {
				o.Available = false
				changed = true
			}
			offers = append(offers, o)
		}
		if changed {
			out[i] = it.WithOfferings(offers)
		}
	}
	return out
}

// provision plans the pending pods with scheduling.Solve and launches the
// NodeClaims it asks for; pods it fits on existing nodes are left to
// kube-scheduler, and those on new nodes are nominated to them.
func (s *sim) provision() {
	pending := s.pendingPods()
	if len(pending) == 0 {
		return
	}
	snap := s.snapshot(pending)
	plan := scheduling.Solve(snap, s.cfg.Scheduling)
	s.rec.plans++
	for key, node := range plan.Existing {
		if p, n := s.pods[key], s.nodes[node]; p != nil && n != nil && !n.initialized() {
			p.nominated = n.name
		}
	}
	for _, nc := range plan.NewNodeClaims {
		n := s.launch(nc, "provisioning")
		if n == nil {
			continue
		}
		for _, pod := range nc.Pods {
			if p := s.pods[pod.Namespace+"/"+pod.Name]; p != nil {
				p.nominated = n.name
			}
		}
	}
	s.queueBind()
}

// launch creates a NodeClaim as the cloud provider would: the cheapest
// available offering of its options that its requirements allow. A
// shortage refuses it; the offering is then unavailable to plans for three
// minutes (Karpenter's cache), and its pods are tried again.
func (s *sim) launch(nc *scheduling.NewNodeClaim, why string) *simNode {
	var best *cloudprovider.InstanceType
	var bestOffer cloudprovider.Offering
	for _, it := range nc.InstanceTypes {
		for _, o := range it.Offerings {
			// A commitment's room is the planner's pricing; EC2 launches
			// the ordinary offering, and the bill applies the commitment.
			if !o.Available || o.Limited() || !nc.Requirements.Allows(corev1.LabelTopologyZone, o.Zone) || !nc.Requirements.Allows(v1.LabelCapacityType, o.CapacityType) {
				continue
			}
			if until, ok := s.unavailable[offering{it.Name, o.Zone, o.CapacityType}]; ok && s.now.Before(until) {
				continue
			}
			if best == nil || o.Price < bestOffer.Price || o.Price == bestOffer.Price && it.Name < best.Name {
				best, bestOffer = it, o
			}
		}
	}
	if best == nil {
		s.rec.launchFailed++
		return nil
	}
	if s.isShort(best.Name, bestOffer) {
		s.unavailable[offering{best.Name, bestOffer.Zone, bestOffer.CapacityType}] = s.now.Add(3 * time.Minute)
		s.rec.launchFailed++
		// The provisioner tries the pods again.
		s.after(time.Second, s.pendingAdded)
		return nil
	}
	name := ""
	for name == "" || s.nodes[name] != nil {
		// A node the run started from may hold the name.
		s.nodeSeq++
		name = fmt.Sprintf("%s-%05d", nc.NodePool, s.nodeSeq)
	}
	pool := s.pools[nc.NodePool]
	n := &simNode{name: name, pool: nc.NodePool, it: best, offering: bestOffer,
		launched: s.now, pods: map[string]*simPod{}, hash: s.poolHash[nc.NodePool],
		classPrint: s.classPrints[s.classOf(nc.NodePool)]}
	n.labels = map[string]string{}
	for k, v := range nc.Requirements.Labels() {
		n.labels[k] = v
	}
	for k, v := range pool.Spec.Template.Labels {
		n.labels[k] = v
	}
	for k, v := range best.Labels {
		n.labels[k] = v
	}
	n.labels[corev1.LabelInstanceTypeStable] = best.Name
	n.labels[corev1.LabelTopologyZone] = bestOffer.Zone
	n.labels[v1.LabelCapacityType] = bestOffer.CapacityType
	n.labels[v1.LabelNodePool] = nc.NodePool
	n.labels[corev1.LabelHostname] = n.name
	n.taints = append([]corev1.Taint(nil), pool.Spec.Template.Spec.Taints...)
	s.nodes[n.name] = n
	s.live++
	if s.live > s.rec.peak {
		s.rec.peak = s.live
	}
	s.rec.launched(n, why)
	s.billChanged()
	s.changed()
	s.after(s.cfg.Timing.Launch+s.cfg.Timing.Initialize, func() {
		if n.gone || n.deleting {
			return
		}
		n.readyAt, n.lastEvent = s.now, s.now
		s.changed()
		s.queueBind()
	})
	if after := pool.Spec.Template.Spec.ExpireAfter; !after.IsNever() {
		s.after(*after.Duration, func() { s.expire(n) })
	}
	return n
}

func (s *sim) isShort(instanceType string, o cloudprovider.Offering) bool {
	for _, sh := range s.short {
		if s.now.Before(sh.until) && (sh.InstanceType == "" || sh.InstanceType == instanceType) &&
			(sh.Zone == "" || sh.Zone == o.Zone) && (sh.CapacityType == "" || sh.CapacityType == o.CapacityType) {
			return true
		}
	}
	return false
}

// queueBind runs kube-scheduler once the events of this instant are done.
func (s *sim) queueBind() {
	if s.bindQueued {
		return
	}
	s.bindQueued = true
	s.after(0, s.schedule)
}

// schedule binds pending pods to initialized nodes with room, as
// kube-scheduler does within moments: the longest pending first, each to
// the node its default profile scores highest (kubesched.Pick: least
// allocated and balanced, apart from its siblings, preferred affinity,
// PreferNoSchedule taints), which spreads pods where the planner packs
// them.
// Pods whose place depends on other pods (pod affinity, anti-affinity,
// topology spread), on host ports or on volumes (a claim's zone, attach
// limits), which that scoring does not model, go where the planner fits
// them on the ready nodes instead.
func (s *sim) schedule() {
	s.bindQueued = false
	pending := s.pendingPods()
	if len(pending) == 0 {
		return
	}
	var ready []*simNode
	var nodes []kubesched.Node
	for _, n := range s.liveNodes() {
		if !n.initialized() || n.deleting || (n.underway != nil && n.underway.marked) {
			continue
		}
		sn := s.schedulingNode(n)
		alloc := resources.FromResourceList(n.it.Allocatable)
		free := alloc.Sub(scheduling.DaemonOverhead(s.daemonSets, sn))
		for _, p := range sn.Pods {
			free = free.Sub(resources.PodRequests(p))
		}
		ready = append(ready, n)
		nodes = append(nodes, kubesched.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels}, Spec: corev1.NodeSpec{Taints: n.taints}},
			Alloc: alloc, Free: free})
	}
	if len(ready) == 0 {
		return
	}
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].pendingSince.Before(pending[j].pendingSince) })
	// Each node's pods by what the default spreading counts them with.
	siblings := make([]map[string]int, len(ready))
	for i, n := range ready {
		siblings[i] = map[string]int{}
		for _, p := range n.pods {
			siblings[i][siblingKey(p)]++
		}
	}
	var planned []*simPod
	for _, p := range pending {
		if _, volumed := s.usage[p.key]; volumed || kubesched.InterPod(p.pod) || len(pods.HostPorts(p.pod)) > 0 {
			planned = append(planned, p)
			continue
		}
		req := resources.PodRequests(p.pod)
		var count func(int) int
		if key := siblingKey(p); key != "" {
			count = func(i int) int { return siblings[i][key] }
		}
		if i := kubesched.Pick(p.view, req, nodes, count); i >= 0 {
			kubesched.Take(&nodes[i].Free, req)
			siblings[i][siblingKey(p)]++
			s.bind(p, ready[i])
		}
	}
	if len(planned) > 0 {
		s.bindPlanned(planned, ready)
	}
}

// bindPlanned binds pods where the planner fits them on the ready nodes,
// their nominated node first.
func (s *sim) bindPlanned(pending []*simPod, ready []*simNode) {
	snap := scheduling.Snapshot{DaemonSets: s.daemonSets, Nominated: map[string]string{}, Namespaces: s.namespaces, Volumes: s.volumeUsage()}
	for _, n := range ready {
		snap.Nodes = append(snap.Nodes, s.schedulingNode(n))
	}
	for _, p := range pending {
		snap.Pods = append(snap.Pods, p.view)
		if p.nominated != "" {
			snap.Nominated[p.key] = p.nominated
		}
	}
	plan := scheduling.Solve(snap, s.cfg.Scheduling)
	keys := make([]string, 0, len(plan.Existing))
	for key := range plan.Existing {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if p, n := s.pods[key], s.nodes[plan.Existing[key]]; p != nil && n != nil && p.node == nil {
			s.bind(p, n)
		}
	}
}

// siblingKey is what kube-scheduler's default topology spreading counts p
// with: the pods its ReplicaSet selects (for a Deployment, those of the
// same template, as each template is a ReplicaSet of its own), or its
// StatefulSet's. Empty for a Job's pod or a bare Pod, which no ReplicaSet
// or StatefulSet selects (Services, which would, are not modelled).
func siblingKey(p *simPod) string {
	switch p.owner.kind {
	case kindDeployment:
		return p.owner.key + "@" + strconv.Itoa(p.version)
	case kindReplicaSet, kindStatefulSet:
		return p.owner.key
	}
	return ""
}
