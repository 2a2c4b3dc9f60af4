package scheduling

import (
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func onDemandPool(name string, extra ...v1.NodeSelectorRequirementWithMinValues) *v1.NodePool {
	reqs := append([]v1.NodeSelectorRequirementWithMinValues{
		req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
		req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"),
		req("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "4"),
	}, extra...)
	return mkNodePool(name, reqs...)
}

func podAntiAffinity(key string, labels map[string]string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		}}}
	}
}

func podAffinity(key string, labels map[string]string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		}}}
	}
}

func spread(key string, skew int32, labels map[string]string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		})
	}
}

func nodeAffinityTerms(terms ...[]corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
	}
}

func preferredZone(zone string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}},
		}}}}
	}
}

func hostPortOpt(port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}
	}
}

func withRequest(name corev1.ResourceName, q string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests[name] = resource.MustParse(q) }
}

func nodesLabelled(p *Plan, key string) map[string]int {
	out := map[string]int{}
	for _, nc := range p.NewNodeClaims {
		vals := nc.Requirements[key].Values()
		if len(vals) == 1 {
			out[vals[0]] += len(nc.Pods)
		} else {
			out[strings.Join(vals, "|")] += len(nc.Pods)
		}
	}
	return out
}

type solveCase struct {
	name  string
	pools []*v1.NodePool
	pods  []*corev1.Pod
	mod   func(*Snapshot)
	check func(t *testing.T, p *Plan)
}

func wantNodes(n int) func(*testing.T, *Plan) {
	return func(t *testing.T, p *Plan) {
		t.Helper()
		if len(p.NewNodeClaims) != n || len(p.Unschedulable) != 0 {
			t.Fatalf("want %d NodeClaims and all pods placed, got:\n%s", n, summary(p))
		}
	}
}

func wantUnschedulable(n int, reason string) func(*testing.T, *Plan) {
	return func(t *testing.T, p *Plan) {
		t.Helper()
		if len(p.Unschedulable) != n {
			t.Fatalf("want %d unschedulable pods, got:\n%s", n, summary(p))
		}
		for _, u := range p.Unschedulable {
			if !strings.Contains(u.Reason, reason) {
				t.Fatalf("reason %q lacks %q", u.Reason, reason)
			}
		}
	}
}

func TestSolveConstraints(t *testing.T) {
	od := onDemandPool("default")
	cases := []solveCase{
		{name: "requests: init containers count as the max of init and the sum of containers", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "100m", "100Mi", func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}
			})},
			check: func(t *testing.T, p *Plan) {
				if got := p.NewNodeClaims[0].Requests.CPU; got != 3000 {
					t.Fatalf("requests cpu %dm, want 3000m", got)
				}
			}},
		{name: "requests: sidecars add to the containers", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1", "100Mi", func(p *corev1.Pod) {
				always := corev1.ContainerRestartPolicyAlways
				p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}
			})},
			check: func(t *testing.T, p *Plan) {
				if got := p.NewNodeClaims[0].Requests.CPU; got != 1500 {
					t.Fatalf("requests cpu %dm, want 1500m", got)
				}
			}},
		{name: "requests: pod overhead counts", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1", "100Mi", func(p *corev1.Pod) {
				p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
			})},
			check: func(t *testing.T, p *Plan) {
				if got := p.NewNodeClaims[0].Requests.CPU; got != 1250 {
					t.Fatalf("requests cpu %dm, want 1250m", got)
				}
			}},
		{name: "nodeSelector picks arm64", pools: []*v1.NodePool{mkNodePool("any")},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"} })},
			check: func(t *testing.T, p *Plan) {
				wantNodes(1)(t, p)
				if a := p.NewNodeClaims[0].InstanceType.Labels[corev1.LabelArchStable]; a != "arm64" {
					t.Fatalf("arch %s", a)
				}
			}},
		{name: "nodeSelector on a label no NodePool offers", pools: []*v1.NodePool{od},
			pods:  []*corev1.Pod{mkPod("p", "1", "1Gi", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"team": "a"} })},
			check: wantUnschedulable(1, `nodepool "default": label "team" is not offered`)},
		{name: "nodeSelector on a NodePool label", pools: []*v1.NodePool{func() *v1.NodePool {
			np := onDemandPool("team-a")
			np.Spec.Template.Labels = map[string]string{"team": "a"}
			return np
		}()},
			pods:  []*corev1.Pod{mkPod("p", "1", "1Gi", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"team": "a"} })},
			check: wantNodes(1)},
		{name: "required node affinity terms are ORed", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi", nodeAffinityTerms(
				[]corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a"}}},
				[]corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1c"}}},
			))},
			check: func(t *testing.T, p *Plan) {
				wantNodes(1)(t, p)
				if z := nodesLabelled(p, corev1.LabelTopologyZone); z["us-east-1c"] != 1 {
					t.Fatalf("zones %v", z)
				}
			}},
		{name: "required node affinity with no satisfiable term", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi", nodeAffinityTerms(
				[]corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a"}}},
			))},
			check: wantUnschedulable(1, "topology.kubernetes.io/zone")},
		{name: "preferred node affinity is honoured", pools: []*v1.NodePool{od},
			pods: replicas(2, "p", "1", "1Gi", preferredZone("us-east-1b")),
			check: func(t *testing.T, p *Plan) {
				if z := nodesLabelled(p, corev1.LabelTopologyZone); z["us-east-1b"] != 2 {
					t.Fatalf("zones %v\n%s", z, summary(p))
				}
			}},
		{name: "preferred node affinity is relaxed when it cannot be met", pools: []*v1.NodePool{od},
			pods: replicas(2, "p", "1", "1Gi", preferredZone("eu-west-1a")), check: func(t *testing.T, p *Plan) {
				if len(p.Unschedulable) != 0 || len(p.NewNodeClaims) == 0 {
					t.Fatalf("want placed:\n%s", summary(p))
				}
			}},
		{name: "taint not tolerated", pools: []*v1.NodePool{func() *v1.NodePool {
			np := onDemandPool("tainted")
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "spot", Value: "only", Effect: corev1.TaintEffectNoSchedule}}
			return np
		}()}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi")}, check: wantUnschedulable(1, `nodepool "tainted": did not tolerate taint spot=only:NoSchedule`)},
		{name: "taint tolerated", pools: []*v1.NodePool{func() *v1.NodePool {
			np := onDemandPool("tainted")
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "spot", Value: "only", Effect: corev1.TaintEffectNoSchedule}}
			return np
		}()}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpEqual, Value: "only", Effect: corev1.TaintEffectNoSchedule}}
		})}, check: wantNodes(1)},
		{name: "startup taints need no toleration", pools: []*v1.NodePool{func() *v1.NodePool {
			np := onDemandPool("startup")
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "cni", Effect: corev1.TaintEffectNoSchedule}}
			return np
		}()}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi")}, check: wantNodes(1)},
		{name: "hostname anti-affinity spreads pods over nodes", pools: []*v1.NodePool{od},
			pods: replicas(3, "p", "500m", "512Mi", withLabels("app", "web"), podAntiAffinity(corev1.LabelHostname, map[string]string{"app": "web"})), check: wantNodes(3)},
		{name: "without anti-affinity the pods share a node", pools: []*v1.NodePool{od},
			pods: replicas(3, "p", "500m", "512Mi", withLabels("app", "web")), check: wantNodes(1)},
		{name: "zone anti-affinity allows one pod per zone", pools: []*v1.NodePool{od},
			pods:  replicas(4, "p", "500m", "512Mi", withLabels("app", "web"), podAntiAffinity(corev1.LabelTopologyZone, map[string]string{"app": "web"})),
			check: func(t *testing.T, p *Plan) { wantUnschedulable(1, "anti-affinity")(t, p) }},
		{name: "zone affinity follows the pod it targets", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("web", "500m", "512Mi", podAffinity(corev1.LabelTopologyZone, map[string]string{"app": "db"}))},
			mod: func(s *Snapshot) {
				s.Nodes = []*Node{{Name: "db-node", Labels: map[string]string{corev1.LabelTopologyZone: "us-east-1b", corev1.LabelHostname: "db-node"},
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("10")},
					Pods:        []*corev1.Pod{mkPod("db", "900m", "900Mi", withLabels("app", "db"))}}}
			},
			check: func(t *testing.T, p *Plan) {
				if z := nodesLabelled(p, corev1.LabelTopologyZone); z["us-east-1b"] != 1 {
					t.Fatalf("zones %v\n%s", z, summary(p))
				}
			}},
		{name: "affinity to pods that do not exist", pools: []*v1.NodePool{od},
			pods:  []*corev1.Pod{mkPod("web", "500m", "512Mi", podAffinity(corev1.LabelTopologyZone, map[string]string{"app": "db"}))},
			check: wantUnschedulable(1, "no pod matches")},
		{name: "zone spread balances zones", pools: []*v1.NodePool{od},
			pods: replicas(6, "p", "1", "1Gi", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "web"})),
			check: func(t *testing.T, p *Plan) {
				z := nodesLabelled(p, corev1.LabelTopologyZone)
				if len(z) != 3 || z["us-east-1a"] != 2 || z["us-east-1b"] != 2 || z["us-east-1c"] != 2 {
					t.Fatalf("zones %v\n%s", z, summary(p))
				}
			}},
		{name: "without spread the pods share one zone", pools: []*v1.NodePool{od},
			pods: replicas(6, "p", "1", "1Gi", withLabels("app", "web")),
			check: func(t *testing.T, p *Plan) {
				if z := nodesLabelled(p, corev1.LabelTopologyZone); len(z) != 1 {
					t.Fatalf("zones %v\n%s", z, summary(p))
				}
			}},
		{name: "hostname spread puts one pod per node", pools: []*v1.NodePool{od},
			pods: replicas(4, "p", "250m", "256Mi", withLabels("app", "web"), spread(corev1.LabelHostname, 1, map[string]string{"app": "web"})), check: wantNodes(4)},
		{name: "capacity-type spread uses spot and on-demand", pools: []*v1.NodePool{mkNodePool("mixed",
			req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"), req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c"))},
			pods: replicas(4, "p", "1", "1Gi", withLabels("app", "web"), spread(v1.LabelCapacityType, 1, map[string]string{"app": "web"})),
			check: func(t *testing.T, p *Plan) {
				ct := nodesLabelled(p, v1.LabelCapacityType)
				if ct["spot"] != 2 || ct["on-demand"] != 2 {
					t.Fatalf("capacity types %v\n%s", ct, summary(p))
				}
			}},
		{name: "host ports conflict", pools: []*v1.NodePool{od}, pods: replicas(2, "p", "500m", "512Mi", hostPortOpt(8080)), check: wantNodes(2)},
		{name: "different host ports share a node", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("a", "500m", "512Mi", hostPortOpt(8080)), mkPod("b", "500m", "512Mi", hostPortOpt(9090))}, check: wantNodes(1)},
		{name: "daemonset overhead is on every new node", pools: []*v1.NodePool{od}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			mod: func(s *Snapshot) { s.DaemonSets = []*corev1.Pod{mkPod("ds", "700m", "700Mi")} },
			check: func(t *testing.T, p *Plan) {
				if got := p.NewNodeClaims[0].Requests.CPU; got != 1700 {
					t.Fatalf("requests cpu %dm, want 1700m (pod + daemonset)", got)
				}
			}},
		{name: "daemonset that does not tolerate the pool's taint adds nothing", pools: []*v1.NodePool{func() *v1.NodePool {
			np := onDemandPool("tainted")
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
			return np
		}()}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		})},
			mod: func(s *Snapshot) { s.DaemonSets = []*corev1.Pod{mkPod("ds", "700m", "700Mi")} },
			check: func(t *testing.T, p *Plan) {
				if got := p.NewNodeClaims[0].Requests.CPU; got != 1000 {
					t.Fatalf("requests cpu %dm, want 1000m", got)
				}
			}},
		{name: "extended resources pick a GPU type", pools: []*v1.NodePool{mkNodePool("gpu")},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi", withRequest("nvidia.com/gpu", "1"))},
			check: func(t *testing.T, p *Plan) {
				wantNodes(1)(t, p)
				if g := p.NewNodeClaims[0].InstanceType.Allocatable["nvidia.com/gpu"]; g.IsZero() {
					t.Fatalf("%s has no GPU", p.NewNodeClaims[0].InstanceType.Name)
				}
			}},
		{name: "without extended resources no GPU type", pools: []*v1.NodePool{mkNodePool("gpu")}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			check: func(t *testing.T, p *Plan) {
				if g := p.NewNodeClaims[0].InstanceType.Allocatable["nvidia.com/gpu"]; !g.IsZero() {
					t.Fatalf("%s has a GPU", p.NewNodeClaims[0].InstanceType.Name)
				}
			}},
		{name: "higher weight wins over price", pools: []*v1.NodePool{onDemandPool("cheap"), func() *v1.NodePool {
			np := onDemandPool("preferred", req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m7i"))
			w := int32(50)
			np.Spec.Weight = &w
			return np
		}()}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			check: func(t *testing.T, p *Plan) {
				if p.NewNodeClaims[0].NodePool != "preferred" {
					t.Fatalf("\n%s", summary(p))
				}
			}},
		{name: "limits stop the pool", pools: []*v1.NodePool{func() *v1.NodePool {
			np := mkNodePool("spot", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "t3a.large"), req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot"))
			np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("16")}
			return np
		}()}, pods: replicas(40, "p", "500m", "512Mi"),
			check: func(t *testing.T, p *Plan) {
				if len(p.NewNodeClaims) != 8 || len(p.Unschedulable) != 16 {
					t.Fatalf("want 8 nodes and 16 pending:\n%s", summary(p))
				}
				wantUnschedulable(16, `all available instance types exceed limits for nodepool: "spot"`)(t, p)
			}},
		{name: "minValues keeps enough families", pools: []*v1.NodePool{onDemandPool("flex", func() v1.NodeSelectorRequirementWithMinValues {
			r := req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpExists)
			five := 5
			r.MinValues = &five
			return r
		}())}, pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			check: func(t *testing.T, p *Plan) {
				fams := map[string]bool{}
				for _, it := range p.NewNodeClaims[0].InstanceTypes {
					fams[it.Labels["karpenter.k8s.aws/instance-family"]] = true
				}
				if len(fams) < 5 {
					t.Fatalf("%d families among options", len(fams))
				}
			}},
		{name: "Gte and Lte bound instance-cpu", pools: []*v1.NodePool{onDemandPool("eight",
			req("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpGte, "8"), req("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpLte, "8"))},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			check: func(t *testing.T, p *Plan) {
				for _, it := range p.NewNodeClaims[0].InstanceTypes {
					if it.Labels["karpenter.k8s.aws/instance-cpu"] != "8" {
						t.Fatalf("%s has %s cpus", it.Name, it.Labels["karpenter.k8s.aws/instance-cpu"])
					}
				}
			}},
		{name: "NotIn excludes families", pools: []*v1.NodePool{onDemandPool("no-c", req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpNotIn, "c"))},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi")},
			check: func(t *testing.T, p *Plan) {
				for _, it := range p.NewNodeClaims[0].InstanceTypes {
					if it.Labels["karpenter.k8s.aws/instance-category"] == "c" {
						t.Fatalf("option %s", it.Name)
					}
				}
			}},
		{name: "DoesNotExist excludes GPU types", pools: []*v1.NodePool{mkNodePool("no-gpu", req("karpenter.k8s.aws/instance-gpu-count", corev1.NodeSelectorOpDoesNotExist))},
			pods:  []*corev1.Pod{mkPod("p", "1", "1Gi", withRequest("nvidia.com/gpu", "1"))},
			check: wantUnschedulable(1, "no instance type")},
		{name: "pods fit on existing capacity", pools: []*v1.NodePool{od}, pods: replicas(3, "p", "1", "1Gi"),
			mod: func(s *Snapshot) {
				s.Nodes = []*Node{{Name: "existing", Labels: map[string]string{corev1.LabelHostname: "existing", corev1.LabelTopologyZone: "us-east-1a"},
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")}}}
			},
			check: func(t *testing.T, p *Plan) {
				if len(p.NewNodeClaims) != 0 || len(p.Existing) != 3 {
					t.Fatalf("want all on the existing node:\n%s %v", summary(p), p.Existing)
				}
			}},
		{name: "pods do not use a node being deleted", pools: []*v1.NodePool{od}, pods: replicas(1, "p", "1", "1Gi"),
			mod: func(s *Snapshot) {
				s.Nodes = []*Node{{Name: "old", MarkedForDeletion: true, Labels: map[string]string{corev1.LabelHostname: "old"},
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")}}}
			},
			check: wantNodes(1)},
		{name: "no NodePool can take the pod: a reason per pool", pools: []*v1.NodePool{od, onDemandPool("other")},
			pods:  []*corev1.Pod{mkPod("huge", "1000", "1Gi")},
			check: wantUnschedulable(1, `nodepool "other": no instance type has room`)},
		{name: "matchFields is rejected", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1", "1Gi", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}}}}}}}
			})},
			check: wantUnschedulable(1, "matchFields is not supported")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mods []func(*Snapshot)
			if tc.mod != nil {
				mods = append(mods, tc.mod)
			}
			plan := solve(t, tc.pools, tc.pods, mods...)
			tc.check(t, plan)
		})
	}
}
