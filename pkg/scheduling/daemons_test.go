package scheduling

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func daemonSetPod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	return mkPod(name, cpu, mem, opts...)
}

func withNodeSelector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func ownedByDaemonSet(name string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name}}
	}
}

// wantEveryOptionFits checks that each launch option of each NodeClaim has
// room for its pods plus the DaemonSet overhead that applies to that type,
// as overheadOf says.
func wantEveryOptionFits(t *testing.T, p *Plan, overheadOf func(it map[string]string) int64) {
	t.Helper()
	for _, nc := range p.NewNodeClaims {
		var pods int64
		for _, pod := range nc.Pods {
			pods += resources.PodRequests(pod).CPU
		}
		for _, it := range nc.InstanceTypes {
			need := pods + overheadOf(it.Labels)
			if alloc := it.Allocatable.Cpu().MilliValue(); need > alloc {
				t.Errorf("option %s has %dm cpu, needs %dm (pods %dm and its DaemonSets)", it.Name, alloc, need, pods)
			}
		}
		if want := pods + overheadOf(nc.InstanceType.Labels); nc.Requests.CPU != want {
			t.Errorf("requests %dm cpu, want %dm for %s", nc.Requests.CPU, want, nc.InstanceType.Name)
		}
	}
}

func TestDaemonSetOverhead(t *testing.T) {
	od := onDemandPool("default")
	withPoolTaints := func(taints, startup []corev1.Taint) *v1.NodePool {
		np := onDemandPool("tainted")
		np.Spec.Template.Spec.Taints = taints
		np.Spec.Template.Spec.StartupTaints = startup
		return np
	}
	tolerate := func(key string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpExists}}
		}
	}
	cpuOf := func(want int64) func(*testing.T, *Plan) {
		return func(t *testing.T, p *Plan) {
			t.Helper()
			wantNodes(1)(t, p)
			if got := p.NewNodeClaims[0].Requests.CPU; got != want {
				t.Fatalf("requests %dm cpu, want %dm", got, want)
			}
			wantEveryOptionFits(t, p, func(map[string]string) int64 { return want - 1300 })
		}
	}
	cases := []solveCase{
		// The reproduction: aws-node, kube-proxy and ebs-csi-node
		// select kubernetes.io/os=linux, which the pool does not list.
		{name: "a linux nodeSelector counts on a pool without the os label", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1300m", "1Gi")},
			mod: func(s *Snapshot) {
				s.DaemonSets = []*corev1.Pod{daemonSetPod("aws-node", "700m", "100Mi", withNodeSelector(corev1.LabelOSStable, "linux"))}
			},
			check: cpuOf(2000)},
		{name: "a windows nodeSelector does not count on linux types", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1300m", "1Gi")},
			mod: func(s *Snapshot) {
				s.DaemonSets = []*corev1.Pod{daemonSetPod("win", "700m", "100Mi", withNodeSelector(corev1.LabelOSStable, "windows"))}
			},
			check: cpuOf(1300)},
		{name: "required node affinity on the arch label counts", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1300m", "1Gi")},
			mod: func(s *Snapshot) {
				s.DaemonSets = []*corev1.Pod{daemonSetPod("agent", "700m", "100Mi", nodeAffinityTerms(
					[]corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}},
					[]corev1.NodeSelectorRequirement{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}, {Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
				))}
			},
			check: cpuOf(2000)},
		{name: "startup taints do not keep DaemonSets off", pools: []*v1.NodePool{withPoolTaints(nil, []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}})},
			pods:  []*corev1.Pod{mkPod("p", "1300m", "1Gi")},
			mod:   func(s *Snapshot) { s.DaemonSets = []*corev1.Pod{daemonSetPod("ds", "700m", "100Mi")} },
			check: cpuOf(2000)},
		{name: "a PreferNoSchedule taint does not keep DaemonSets off", pools: []*v1.NodePool{withPoolTaints([]corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}, nil)},
			pods:  []*corev1.Pod{mkPod("p", "1300m", "1Gi")},
			mod:   func(s *Snapshot) { s.DaemonSets = []*corev1.Pod{daemonSetPod("ds", "700m", "100Mi")} },
			check: cpuOf(2000)},
		{name: "a NoSchedule taint in spec.taints keeps an intolerant DaemonSet off", pools: []*v1.NodePool{withPoolTaints([]corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}, nil)},
			pods: []*corev1.Pod{mkPod("p", "1300m", "1Gi", tolerate("dedicated"))},
			mod: func(s *Snapshot) {
				s.DaemonSets = []*corev1.Pod{daemonSetPod("ds", "700m", "100Mi"), daemonSetPod("tolerant", "300m", "100Mi", tolerate("dedicated"))}
			},
			check: cpuOf(1600)},
		{name: "a DaemonSet on a NodePool template label counts", pools: []*v1.NodePool{func() *v1.NodePool {
			np := onDemandPool("team")
			np.Spec.Template.Labels = map[string]string{"team": "a"}
			return np
		}()},
			pods: []*corev1.Pod{mkPod("p", "1300m", "1Gi")},
			mod: func(s *Snapshot) {
				s.DaemonSets = []*corev1.Pod{daemonSetPod("ds", "700m", "100Mi", withNodeSelector("team", "a")), daemonSetPod("other", "500m", "100Mi", withNodeSelector("team", "b"))}
			},
			check: cpuOf(2000)},
		{name: "a DaemonSet selecting karpenter.sh/initialized counts", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1300m", "1Gi")},
			mod: func(s *Snapshot) {
				s.DaemonSets = []*corev1.Pod{daemonSetPod("ds", "700m", "100Mi", withNodeSelector(v1.LabelNodeInitialized, "true"))}
			},
			check: cpuOf(2000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, solve(t, tc.pools, tc.pods, tc.mod))
		})
	}
}

// TestDaemonSetOnSomeTypes: a DaemonSet that selects a label only some
// instance types carry (here, one family) takes room on those types only, and
// every launch option of a NodeClaim has room for its own DaemonSets.
func TestDaemonSetOnSomeTypes(t *testing.T) {
	const family = "karpenter.k8s.aws/instance-family"
	pool := onDemandPool("default", req(family, corev1.NodeSelectorOpIn, "c6a", "c7a", "m6a", "m7a"))
	overheadOf := func(l map[string]string) int64 {
		if l[family] == "c6a" {
			return 3000
		}
		return 0
	}
	for _, cpu := range []string{"500m", "1500m", "3"} {
		t.Run(cpu, func(t *testing.T) {
			plan := solve(t, []*v1.NodePool{pool}, []*corev1.Pod{mkPod("p", cpu, "512Mi")}, func(s *Snapshot) {
				s.DaemonSets = []*corev1.Pod{daemonSetPod("c6a-agent", "3", "100Mi", withNodeSelector(family, "c6a"))}
			})
			wantNodes(1)(t, plan)
			wantEveryOptionFits(t, plan, overheadOf)
			var c6a, others int
			for _, it := range plan.NewNodeClaims[0].InstanceTypes {
				if it.Labels[family] == "c6a" {
					c6a++
				} else {
					others++
				}
			}
			if others == 0 {
				t.Fatalf("no option outside c6a:\n%s", summary(plan))
			}
			// Types without the DaemonSet need room for the pod alone, so
			// the plan costs no more than the cheapest of them that fits it.
			cheapest := 1e9
			for _, it := range testCatalog(t) {
				switch it.Labels[family] {
				case "c7a", "m6a", "m7a":
				default:
					continue
				}
				if resources.PodRequests(mkPod("p", cpu, "512Mi")).Fits(resources.FromResourceList(it.Allocatable)) {
					if off, ok := it.CheapestOffering(func(o cloudprovider.Offering) bool { return o.CapacityType == v1.CapacityTypeOnDemand }); ok && off.Price < cheapest {
						cheapest = off.Price
					}
				}
			}
			if plan.TotalPrice() > cheapest+1e-9 {
				t.Fatalf("plan costs $%.4f, more than the cheapest type without the DaemonSet ($%.4f):\n%s", plan.TotalPrice(), cheapest, summary(plan))
			}
		})
	}
}

// TestInFlightNodesOweTheirDaemonSets: the DaemonSet pods of a NodeClaim
// that has no Ready node yet are not bound, but will take their room first.
func TestInFlightNodesOweTheirDaemonSets(t *testing.T) {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	labels := map[string]string{corev1.LabelHostname: "nodeclaim-a", corev1.LabelOSStable: "linux", corev1.LabelTopologyZone: "us-east-1a"}
	ds := []*corev1.Pod{
		daemonSetPod("aws-node", "1", "100Mi", withNodeSelector(corev1.LabelOSStable, "linux")),
		daemonSetPod("win", "1", "100Mi", withNodeSelector(corev1.LabelOSStable, "windows")),
		daemonSetPod("gpu", "1", "100Mi", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
		}, withNodeSelector("gpu", "true")),
	}
	cases := []struct {
		name     string
		node     *Node
		onNode   int
		newNodes int
	}{
		{name: "an in-flight NodeClaim keeps room for its DaemonSet", node: &Node{Name: "nodeclaim/a", Labels: labels, Allocatable: alloc, InFlight: true},
			onNode: 3, newNodes: 1},
		{name: "a DaemonSet pod already bound is not counted twice", node: &Node{Name: "a", Labels: labels, Allocatable: alloc, InFlight: true,
			Pods: []*corev1.Pod{mkPod("aws-node-x", "1", "100Mi", ownedByDaemonSet("aws-node"))}},
			onNode: 3, newNodes: 1},
		{name: "startup and not-ready taints do not keep the DaemonSet off", node: &Node{Name: "a", Labels: labels, Allocatable: alloc, InFlight: true,
			Taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}},
			onNode: 3, newNodes: 1},
		{name: "a Ready node's DaemonSet pods are what is bound", node: &Node{Name: "a", Labels: labels, Allocatable: alloc},
			onNode: 4, newNodes: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := solve(t, []*v1.NodePool{onDemandPool("default")}, replicas(4, "p", "1", "1Gi"), func(s *Snapshot) {
				s.Nodes = []*Node{tc.node}
				s.DaemonSets = ds
			})
			if len(plan.Existing) != tc.onNode || len(plan.NewNodeClaims) != tc.newNodes || len(plan.Unschedulable) != 0 {
				t.Fatalf("want %d pods on the node and %d new nodes, got %d on it:\n%s", tc.onNode, tc.newNodes, len(plan.Existing), summary(plan))
			}
		})
	}
}
