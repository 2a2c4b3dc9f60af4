package state

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/buffers"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster reads cluster state for planning.
type Cluster struct {
	Client        client.Client
	CloudProvider cloudprovider.CloudProvider
	// Clock times how long created NodeClaims are remembered (Remember);
	// the real clock when nil.
	Clock clock.PassiveClock
	// Cache, when set, is the informer cache Client reads from: Pods and
	// Nodes then read its objects in place. Tests with a fake client
	// leave it nil.
	Cache cache.Informers
	// Nominations, when set, are the provisioner's: a snapshot then tells
	// the plan which node each pending pod was last planned onto
	// (scheduling.Snapshot.Nominated).
	Nominations *Nominations
	// StaticCapacity is the feature gate: static NodePools (spec.replicas)
	// go to the snapshot's Static pools; without it they are left out with
	// the reason.
	StaticCapacity bool
	// Buffers, with the CapacityBuffer gate, are the buffers' virtual pods,
	// pending with the real ones in every plan.
	Buffers *buffers.Store
	created created
	plans   planSlot
}

// NodePoolProblem is a NodePool that cannot launch nodes, and why.
type NodePoolProblem struct {
	NodePool string
	Reason   string
	// Err is the cloud provider's failure to list the pool's instance
	// types, nil for a problem of the cluster's objects: an operator must
	// see it in the log, not only in the pods' events.
	Err error
}

// Snapshot returns the scheduling input for the given pending pods (less
// those bound since they were listed), and the NodePools left out with the
// reason.
func (c *Cluster) Snapshot(ctx context.Context, pending []*corev1.Pod) (scheduling.Snapshot, []NodePoolProblem, error) {
	snap := scheduling.Snapshot{Pods: pending}
	var pools v1.NodePoolList
	if err := c.Client.List(ctx, &pools); err != nil {
		return snap, nil, err
	}
	// Read, never written, so not deep-copied: in the scale run the
	// snapshot's and disruption's copies of 1,700 NodeClaims were 18 MB of
	// the heap.
	var claims v1.NodeClaimList
	if err := c.Client.List(ctx, &claims, client.UnsafeDisableDeepCopy); err != nil {
		return snap, nil, err
	}
	claims.Items = c.withCreated(claims.Items)
	// Nodes and pods are the cache's own objects, read and never written:
	// a snapshot of 10,000 pods copied them every batch and every
	// disruption poll, most of the controller's allocation at that size.
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return snap, nil, err
	}
	podList, err := c.Pods(ctx)
	if err != nil {
		return snap, nil, err
	}
	if snap.DaemonSets, err = c.DaemonSetPods(ctx); err != nil {
		return snap, nil, err
	}
	vols, err := c.readVolumes(ctx)
	if err != nil {
		return snap, nil, err
	}
	snap.Volumes = map[string]volumes.Usage{}
	snap.Pods = vols.index.Apply(snap.Pods, snap.Volumes)
	var namespaces corev1.NamespaceList
	if err := c.Client.List(ctx, &namespaces); err != nil {
		return snap, nil, err
	}
	snap.Namespaces = make(map[string]map[string]string, len(namespaces.Items))
	for _, ns := range namespaces.Items {
		snap.Namespaces[ns.Name] = ns.Labels
	}

	var problems []NodePoolProblem
	typesByPool := map[string][]*cloudprovider.InstanceType{}
	for i := range pools.Items {
		np := &pools.Items[i]
		if np.DeletionTimestamp != nil {
			problems = append(problems, NodePoolProblem{NodePool: np.Name, Reason: "the NodePool is being deleted"})
			continue
		}
		if reason := StaticNodePool(np, c.StaticCapacity); reason != "" {
			problems = append(problems, NodePoolProblem{NodePool: np.Name, Reason: reason})
			continue
		}
		if reason := InvalidRequirementValue(np); reason != "" {
			problems = append(problems, NodePoolProblem{NodePool: np.Name, Reason: reason})
			continue
		}
		if _, _, err := spendcap.Of(np); err != nil {
			problems = append(problems, NodePoolProblem{NodePool: np.Name, Reason: err.Error()})
			continue
		}
		if reason := c.nodeClassProblem(ctx, np); reason != "" {
			problems = append(problems, NodePoolProblem{NodePool: np.Name, Reason: reason})
			continue
		}
		its, err := c.CloudProvider.InstanceTypes(ctx, np)
		if err != nil {
			// Only this pool is left out (as Karpenter skips it): the
			// others still launch, and the pods learn why this one did not.
			problems = append(problems, NodePoolProblem{NodePool: np.Name, Reason: "its instance types could not be listed: " + err.Error(), Err: err})
			continue
		}
		if np.Spec.Replicas != nil {
			snap.Static = append(snap.Static, scheduling.NodePool{NodePool: np, InstanceTypes: its})
			continue
		}
		typesByPool[np.Name] = its
	}

	// The pods of nodes being deleted are pending (Moving), and counted
	// there alone: their old node takes nothing more.
	moves, err := c.moves(ctx)
	if err != nil {
		return snap, nil, err
	}
	podsByNode := map[string][]*corev1.Pod{}
	boundNow := map[string]bool{}
	for _, p := range podList {
		moving := moves(p)
		if p.Spec.NodeName != "" && !moving {
			boundNow[p.Namespace+"/"+p.Name] = true
		}
		if p.Spec.NodeName != "" && !pods.IsTerminal(p) && !moving {
			podsByNode[p.Spec.NodeName] = append(podsByNode[p.Spec.NodeName], p)
		}
	}
	for name, onNode := range podsByNode {
		podsByNode[name] = vols.index.Apply(onNode, snap.Volumes)
	}
	// The pending pods were listed before these, and kube-scheduler may have
	// bound some since: such a pod is counted on its node only. Counted both
	// pending and bound, it would get capacity twice (a scale-up of 1,000
	// pods that kube-scheduler bound over half a minute made an extra
	// NodeClaim or two in each batch meanwhile).
	stillPending := snap.Pods[:0:0]
	for _, p := range snap.Pods {
		if !boundNow[p.Namespace+"/"+p.Name] {
			stillPending = append(stillPending, p)
		}
	}
	snap.Pods = stillPending
	typeByName := map[string]*cloudprovider.InstanceType{}
	for _, its := range typesByPool {
		for _, it := range its {
			typeByName[it.Name] = it
		}
	}
	claimByProvider := map[string]*v1.NodeClaim{}
	capped := cappedPools(pools.Items, typesByPool)
	effective := c.effectivePrices(ctx, capped)
	inUse := map[string]resources.Resources{}
	nodeCount := map[string]int64{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Status.ProviderID != "" {
			claimByProvider[nc.Status.ProviderID] = nc
		}
		pool := nc.Labels[v1.LabelNodePool]
		// Before launch the NodeClaim counts against its pool's limits as
		// the smallest of its options, as the batch that made it counted
		// it: counting only its pods' requests let later batches take the
		// rest of each node again, and a pool of 2,000 CPUs launch 2,300.
		capacity := resources.FromResourceList(nc.Status.Capacity)
		if len(nc.Status.Capacity) == 0 {
			capacity = resources.FromResourceList(smallestOption(nc, typesByPool[pool], capacityOf))
			if capacity.CPU == 0 && capacity.Memory == 0 {
				capacity = resources.FromResourceList(nc.Spec.Resources.Requests)
			}
		}
		if capped[pool] {
			capacity = capacity.With(spendcap.Resource, spendcap.Micro(Charges(nc, typesByPool[pool], effective).Effective))
		}
		inUse[pool] = inUse[pool].Add(capacity)
		nodeCount[pool]++
	}
	nodeNames := map[string]bool{}
	nodeProviders := map[string]bool{}
	// nodeOfClaim names each NodeClaim's node in the snapshot, for its
	// nominations.
	nodeOfClaim := map[string]string{}
	for _, n := range nodes {
		nodeNames[n.Name] = true
		nodeProviders[n.Spec.ProviderID] = true
		nc := claimByProvider[n.Spec.ProviderID]
		ready := nodeReady(n)
		if nc == nil && !ready {
			continue // not ours and not usable
		}
		sn := &scheduling.Node{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Allocatable: n.Status.Allocatable,
			Pods: podsByNode[n.Name], MarkedForDeletion: n.DeletionTimestamp != nil || n.Spec.Unschedulable,
			AttachLimits: vols.nodeAttachLimits(n, typeByName)}
		if nc != nil {
			nodeOfClaim[nc.Name] = n.Name
			sn.NodePool = nc.Labels[v1.LabelNodePool]
			sn.InFlight = NodeClaimCondition(nc, v1.ConditionTypeInitialized) != "True"
			if sn.InFlight {
				// Startup taints go once the node is initialized; they keep
				// neither pending pods nor DaemonSets off it.
				sn.Taints = withoutTaints(n.Spec.Taints, nc.Spec.StartupTaints)
			}
			sn.MarkedForDeletion = sn.MarkedForDeletion || nc.DeletionTimestamp != nil
			if len(sn.Allocatable) == 0 {
				sn.Allocatable = nc.Status.Allocatable
			}
		}
		snap.Nodes = append(snap.Nodes, sn)
	}
	// NodeClaims without a node yet are capacity on its way: pods the last
	// batch planned for them must not get a second NodeClaim.
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil || (nc.Status.NodeName != "" && nodeNames[nc.Status.NodeName]) {
			continue
		}
		if nc.Status.ProviderID != "" && nodeProviders[nc.Status.ProviderID] {
			continue
		}
		labels := map[string]string{}
		for _, r := range nc.Spec.Requirements {
			if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				labels[r.Key] = r.Values[0]
			}
		}
		for k, v := range nc.Labels {
			labels[k] = v
		}
		labels[corev1.LabelHostname] = "nodeclaim-" + nc.Name
		// Before launch the NodeClaim carries no instance labels; those all
		// its options share will be on the node, and DaemonSets select them
		// (kubernetes.io/os, for one).
		for k, v := range commonLabels(nc, typesByPool[nc.Labels[v1.LabelNodePool]]) {
			if _, ok := labels[k]; !ok {
				labels[k] = v
			}
		}
		alloc := nc.Status.Allocatable
		if len(alloc) == 0 {
			alloc = smallestOption(nc, typesByPool[nc.Labels[v1.LabelNodePool]], allocatableOf)
		}
		nodeOfClaim[nc.Name] = InFlightName(nc.Name)
		snap.Nodes = append(snap.Nodes, &scheduling.Node{Name: InFlightName(nc.Name), Labels: labels, Taints: nc.Spec.Taints,
			Allocatable: alloc, NodePool: nc.Labels[v1.LabelNodePool], InFlight: true,
			AttachLimits: claimAttachLimits(nc, typesByPool[nc.Labels[v1.LabelNodePool]])})
	}
	snap.Nominated = nominated(c.Nominations.Targets(), snap, nodeOfClaim)
	names := make([]string, 0, len(typesByPool))
	for name := range typesByPool {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var np *v1.NodePool
		for i := range pools.Items {
			if pools.Items[i].Name == name {
				np = &pools.Items[i]
			}
		}
		use := inUse[name].ResourceList()
		use["nodes"] = *resource.NewQuantity(nodeCount[name], resource.DecimalSI)
		snap.NodePools = append(snap.NodePools, scheduling.NodePool{NodePool: np, InstanceTypes: typesByPool[name], InUse: use})
	}
	return snap, problems, nil
}

// StaticNodePool says why a NodePool with spec.replicas launches nothing
// when the StaticCapacity gate is off, or returns "" (a dynamic NodePool,
// or the gate on). Such a NodePool is static: it keeps a fixed number of
// nodes under the gate, and using it for pending pods instead would launch
// nodes its owner never asked for. Leaving it out of every snapshot also
// keeps disruption off its nodes.
func StaticNodePool(np *v1.NodePool, gate bool) string {
	if np.Spec.Replicas == nil || gate {
		return ""
	}
	return fmt.Sprintf("spec.replicas is set (%d), which makes this a static NodePool; static NodePools need the StaticCapacity feature gate "+
		"(FEATURE_GATES=StaticCapacity=true, settings.featureGates.staticCapacity), so it launches no nodes; to provision for pending pods instead, "+
		"recreate it without spec.replicas (a NodePool cannot switch between static and dynamic in place)", *np.Spec.Replicas)
}

// InvalidRequirementValue names the first requirement value of a NodePool
// that is not a label value, or returns "". The CRD lets any value through,
// as Karpenter's does, so this is where one is caught: no node can carry such
// a value, and a NodeClaim would copy it into labels the apiserver refuses.
func InvalidRequirementValue(np *v1.NodePool) string {
	for i, r := range np.Spec.Template.Spec.Requirements {
		for j, value := range r.Values {
			if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
				return fmt.Sprintf("spec.template.spec.requirements[%d].values[%d]: %q (key %q) is not a label value: %s; "+
					"use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
					i, j, value, r.Key, strings.Join(errs, "; "))
			}
		}
	}
	return ""
}

// nodeClassProblem says why a NodePool's NodeClass cannot be used, or "".
func (c *Cluster) nodeClassProblem(ctx context.Context, np *v1.NodePool) string {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return "the NodePool has no nodeClassRef"
	}
	if ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return fmt.Sprintf("nodeClassRef %s/%s is not supported; use group %s, kind EC2NodeClass", ref.Group, ref.Kind, awsv1.Group)
	}
	var nc awsv1.EC2NodeClass
	if err := c.Client.Get(ctx, types.NamespacedName{Name: ref.Name}, &nc); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("EC2NodeClass %q not found; create it or fix spec.template.spec.nodeClassRef.name", ref.Name)
		}
		return err.Error()
	}
	if nc.DeletionTimestamp != nil {
		return fmt.Sprintf("EC2NodeClass %q is being deleted", ref.Name)
	}
	if status, _, message := nc.Readiness(); status != metav1.ConditionTrue {
		if message != "" {
			return fmt.Sprintf("EC2NodeClass %q is not ready (%s)", ref.Name, message)
		}
		return fmt.Sprintf("EC2NodeClass %q is not ready", ref.Name)
	}
	return ""
}

// withoutTaints returns taints less those in drop.
func withoutTaints(in, drop []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range in {
		if !taints.Has(drop, t) {
			out = append(out, t)
		}
	}
	return out
}

// commonLabels are the labels every instance-type option of a NodeClaim
// has with the same value.
func commonLabels(nc *v1.NodeClaim, its []*cloudprovider.InstanceType) map[string]string {
	allowed := optionNames(nc)
	var out map[string]string
	for _, it := range its {
		if !allowed[it.Name] {
			continue
		}
		if out == nil {
			out = maps.Clone(it.Labels)
			continue
		}
		for k, v := range out {
			if it.Labels[k] != v {
				delete(out, k)
			}
		}
	}
	return out
}

// optionNames are the instance types a NodeClaim may launch as.
func optionNames(nc *v1.NodeClaim) map[string]bool {
	allowed := map[string]bool{}
	for _, r := range nc.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn {
			for _, v := range r.Values {
				allowed[v] = true
			}
		}
	}
	return allowed
}

// smallestOption is the least of a resource list (of: capacity or
// allocatable) among a NodeClaim's instance-type options: what it will
// have at least once launched.
func smallestOption(nc *v1.NodeClaim, its []*cloudprovider.InstanceType, of func(*cloudprovider.InstanceType) corev1.ResourceList) corev1.ResourceList {
	allowed := optionNames(nc)
	var out corev1.ResourceList
	for _, it := range its {
		if !allowed[it.Name] {
			continue
		}
		rl := of(it)
		if out == nil {
			out = rl.DeepCopy()
			continue
		}
		for k, q := range rl {
			if cur, ok := out[k]; !ok || q.Cmp(cur) < 0 {
				out[k] = q
			}
		}
		for k := range out {
			if _, ok := rl[k]; !ok {
				delete(out, k)
			}
		}
	}
	return out
}

func capacityOf(it *cloudprovider.InstanceType) corev1.ResourceList    { return it.Capacity }
func allocatableOf(it *cloudprovider.InstanceType) corev1.ResourceList { return it.Allocatable }

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nominated maps each pending pod of snap with a nomination in force to its
// node as snap names it; a nomination for a node or NodeClaim the snapshot
// lacks (gone, or not usable) is dropped.
func nominated(targets map[string]Target, snap scheduling.Snapshot, nodeOfClaim map[string]string) map[string]string {
	if len(targets) == 0 {
		return nil
	}
	inSnap := make(map[string]bool, len(snap.Nodes))
	for _, n := range snap.Nodes {
		inSnap[n.Name] = true
	}
	out := map[string]string{}
	for _, p := range snap.Pods {
		key := p.Namespace + "/" + p.Name
		t, ok := targets[key]
		if !ok {
			continue
		}
		name := t.Node
		if t.NodeClaim != "" {
			name = nodeOfClaim[t.NodeClaim]
		}
		if inSnap[name] {
			out[key] = name
		}
	}
	return out
}
