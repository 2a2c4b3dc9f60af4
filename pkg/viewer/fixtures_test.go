package viewer

import (
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

type nodeSpec struct {
	name, itype, ct, zone, pool string
	age                         time.Duration
	ready, cordoned, deleting   bool
	aws                         bool
}

// kwokNode is a Node as the kwok provider makes one: labels from the
// catalog's type, a kwok:// provider ID, the catalog's allocatable.
func kwokNode(s nodeSpec) corev1.Node {
	rec, ok := catalog.Lookup(s.itype)
	if !ok {
		panic("no catalog type " + s.itype)
	}
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, CreationTimestamp: ago(s.age), Labels: map[string]string{
			corev1.LabelInstanceTypeStable: s.itype, v1.LabelCapacityType: s.ct, corev1.LabelTopologyZone: s.zone,
			corev1.LabelTopologyRegion: "us-east-1", v1.LabelNodePool: s.pool, corev1.LabelArchStable: "amd64",
		}},
		Spec:   corev1.NodeSpec{ProviderID: "kwok://us-east-1/" + s.zone + "/" + s.name, Unschedulable: s.cordoned},
		Status: corev1.NodeStatus{Allocatable: rec.Allocatable.DeepCopy(), Capacity: rec.Allocatable.DeepCopy()},
	}
	if s.aws {
		n.Spec.ProviderID = "aws:///" + s.zone + "/i-0123456789abcdef0"
	}
	status := corev1.ConditionFalse
	if s.ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	if s.deleting {
		n.DeletionTimestamp = &metav1.Time{Time: now}
		n.Finalizers = []string{v1.TerminationFinalizer}
	}
	return n
}

// claimFor is the NodeClaim of a node, initialized unless launching.
func claimFor(n corev1.Node, conds ...metav1.Condition) v1.NodeClaim {
	nc := v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, CreationTimestamp: n.CreationTimestamp, Labels: n.Labels},
		Status:     v1.NodeClaimStatus{ProviderID: n.Spec.ProviderID, NodeName: n.Name, Allocatable: n.Status.Allocatable},
	}
	nc.Status.Conditions = append([]metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue}}, conds...)
	nc.Spec.ExpireAfter = v1.MustParseNillableDuration("720h")
	return nc
}

// launchingClaim has no node yet: Launched, with its type chosen.
func launchingClaim(name, itype, zone, pool string, age time.Duration) v1.NodeClaim {
	return v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(age), Labels: map[string]string{
			corev1.LabelInstanceTypeStable: itype, v1.LabelCapacityType: v1.CapacityTypeOnDemand, corev1.LabelTopologyZone: zone, v1.LabelNodePool: pool,
		}},
		Spec: v1.NodeClaimSpec{ExpireAfter: v1.MustParseNillableDuration("720h")},
		Status: v1.NodeClaimStatus{ProviderID: "kwok://us-east-1/" + zone + "/" + name,
			Conditions: []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue}}},
	}
}

func pod(ns, name, node, cpu, mem string) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), CreationTimestamp: ago(3 * time.Minute)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if node == "" {
		p.Status.Phase = corev1.PodPending
	}
	return p
}

// withInit gives the pod an init container bigger than its containers:
// kube-scheduler, and so the bars, count the larger.
func withInit(p corev1.Pod, cpu string) corev1.Pod {
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu)}}}}
	return p
}

func daemonPod(name, node, cpu string) corev1.Pod {
	p := pod("kube-system", name, node, cpu, "64Mi")
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr(true)}}
	return p
}

func daemonSet(cpu string) appsv1.DaemonSet {
	return appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}}}}
}

func ptr[T any](v T) *T { return &v }

func event(kind, ns, name, reason, msg string, age time.Duration) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: name + "." + reason + "." + age.String()},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name},
		Reason:         reason, Message: msg, Source: corev1.EventSource{Component: EventComponent},
		LastTimestamp: ago(age),
	}
}

func nodePool(name string) v1.NodePool {
	return v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
			{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		}}}}}
}

// mixedCluster has a node in each state Joiner's users meet.
func mixedCluster() Input {
	ready := kwokNode(nodeSpec{name: "ip-10-0-1-1", itype: "c6a.2xlarge", ct: "on-demand", zone: "us-east-1a", pool: "default", age: 3 * time.Hour, ready: true})
	spot := kwokNode(nodeSpec{name: "ip-10-0-1-2", itype: "m6a.large", ct: "spot", zone: "us-east-1b", pool: "spot", age: 2 * time.Hour, ready: true})
	notReady := kwokNode(nodeSpec{name: "ip-10-0-1-3", itype: "c6a.large", ct: "on-demand", zone: "us-east-1c", pool: "default", age: 30 * time.Second})
	cordoned := kwokNode(nodeSpec{name: "ip-10-0-1-4", itype: "r6a.large", ct: "on-demand", zone: "us-east-1a", pool: "default", age: 5 * time.Hour, ready: true, cordoned: true, deleting: true})
	unmanaged := kwokNode(nodeSpec{name: "static-1", itype: "m6a.xlarge", ct: "on-demand", zone: "us-east-1a", pool: "", age: 48 * time.Hour, ready: true})
	unmanaged.Spec.ProviderID = ""
	launchingNC := claimFor(notReady)
	launchingNC.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue}}
	return Input{
		Now:   now,
		Nodes: []corev1.Node{ready, spot, notReady, cordoned, unmanaged},
		NodeClaims: []v1.NodeClaim{
			claimFor(ready, metav1.Condition{Type: v1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue}),
			claimFor(spot, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"}),
			launchingNC,
			claimFor(cordoned, metav1.Condition{Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: "Underutilized"}),
			launchingClaim("default-x7k2p", "c6a.xlarge", "us-east-1b", "default", 10*time.Second),
		},
		Pods: []corev1.Pod{
			pod("default", "web-1", "ip-10-0-1-1", "3", "4Gi"),
			withInit(pod("default", "web-2", "ip-10-0-1-1", "1", "2Gi"), "2500m"),
			daemonPod("agent-a", "ip-10-0-1-1", "100m"),
			pod("default", "batch-1", "ip-10-0-1-2", "1500m", "6Gi"),
			daemonPod("agent-b", "ip-10-0-1-2", "100m"),
			pod("default", "cache-1", "ip-10-0-1-4", "1", "12Gi"),
			pod("default", "tool-1", "static-1", "500m", "1Gi"),
			pod("default", "web-3", "", "1", "1Gi"),
			pod("default", "huge-1", "", "200", "1Gi"),
		},
		NodePools:  []v1.NodePool{nodePool("default"), nodePool("spot")},
		DaemonSets: []appsv1.DaemonSet{daemonSet("100m")},
		Events: []corev1.Event{
			event("Node", "", "ip-10-0-1-1", ReasonDisruptionBlocked, "pdb default/web prevents pod evictions", 2*time.Minute),
			event("NodeClaim", "", "ip-10-0-1-1", ReasonDisruptionBlocked, "no cheaper replacement", 20*time.Minute),
			event("Pod", "default", "web-3", ReasonNominated, "Pod should schedule on: nodeclaim/default-x7k2p", 5*time.Second),
			event("Pod", "default", "web-3", ReasonFailedScheduling, "Failed to schedule pod, incompatible with nodepool \"spot\"", time.Minute),
			event("Pod", "default", "huge-1", ReasonFailedScheduling, "Failed to schedule pod, no instance type has enough resources: cpu 200", 30*time.Second),
			// kube-scheduler's word is not Joiner's.
			{ObjectMeta: metav1.ObjectMeta{Name: "sched"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "huge-1"},
				Reason: ReasonFailedScheduling, Message: "0/5 nodes are available", Source: corev1.EventSource{Component: "default-scheduler"}, LastTimestamp: ago(time.Second)},
		},
	}
}
