package disruption

import (
	"slices"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKubeFits(t *testing.T) {
	target := func(name, cpu string, taints ...corev1.Taint) kubeNode {
		free := resources.FromResourceList(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")})
		return kubeNode{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": name}}, Spec: corev1.NodeSpec{Taints: taints}}, Alloc: free, Free: free}
	}
	noSchedule := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	tolerating := pod("tolerating", "1", "1Gi")
	tolerating.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x"}}
	selecting := pod("selecting", "1", "1Gi")
	selecting.Spec.NodeSelector = map[string]string{"zone": "b"}
	cases := []struct {
		name    string
		pods    []*corev1.Pod
		targets []kubeNode
		want    bool
	}{
		{"nothing to move", nil, nil, true},
		{"one pod per node", []*corev1.Pod{pod("a", "1500m", "1Gi"), pod("b", "1500m", "1Gi")}, []kubeNode{target("a", "2"), target("b", "2")}, true},
		{"more than the room", []*corev1.Pod{pod("a", "2", "1Gi"), pod("b", "2", "1Gi")}, []kubeNode{target("a", "3")}, false},
		// Enough room in total, but not in pieces the pods fit.
		{"room only in total", []*corev1.Pod{pod("a", "1500m", "1Gi"), pod("b", "1500m", "1Gi"), pod("c", "1", "1Gi")}, []kubeNode{target("a", "2"), target("b", "2")}, false},
		// Largest first packs these; smallest first would not.
		{"largest first", []*corev1.Pod{pod("c", "1", "1Gi"), pod("a", "1500m", "1Gi"), pod("b", "1500m", "1Gi")}, []kubeNode{target("a", "2"), target("b", "2500m")}, true},
		{"untolerated taint", []*corev1.Pod{pod("a", "1", "1Gi")}, []kubeNode{target("a", "4", noSchedule)}, false},
		{"tolerated taint", []*corev1.Pod{tolerating}, []kubeNode{target("a", "4", noSchedule)}, true},
		{"node selector elsewhere", []*corev1.Pod{selecting}, []kubeNode{target("a", "4")}, false},
		{"node selector matches", []*corev1.Pod{selecting}, []kubeNode{target("a", "4"), target("b", "1")}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := len((&kubeModel{reqs: map[*corev1.Pod]resources.Resources{}}).stranded([][]*corev1.Pod{tc.pods}, tc.targets)) == 0; got != tc.want {
				t.Fatalf("fits = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRiskPlansAsAFreshPlanWould: the plans risk makes for stranded pods
// share what their NodePools and DaemonSets have in common (built for the
// first, used by the next) and cost what a plan of those pods made from
// nothing costs.
func TestRiskPlansAsAFreshPlanWould(t *testing.T) {
	cases := []struct {
		name string
		// cands are removed; the other nodes are where the pods may go.
		cands []string
		setup func() *setup
	}{
		{name: "one node's pods strand", cands: []string{"a"}, setup: func() *setup {
			s := (&setup{}).add(node("a", "c6a.2xlarge", "on-demand", pod("a-0", "3", "4Gi"), pod("a-1", "3", "4Gi")))
			return s.add(node("b", "c6a.xlarge", "on-demand", pod("b-0", "2", "2Gi")))
		}},
		{name: "two nodes' pods strand", cands: []string{"a", "b"}, setup: func() *setup {
			s := (&setup{}).add(node("a", "c6a.2xlarge", "on-demand", pod("a-0", "5", "4Gi")))
			s.add(node("b", "m6a.2xlarge", "on-demand", pod("b-0", "2", "20Gi")))
			return s.add(node("c", "c6a.large", "on-demand"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.setup()
			snap := scheduling.Snapshot{Nodes: s.nodes, NodePools: []scheduling.NodePool{{NodePool: guide03(), InstanceTypes: catalogTypes()}}}
			m := newKubeModel(snap)
			removed := map[string]bool{}
			var cands []Candidate
			for _, c := range s.cands {
				if slices.Contains(tc.cands, c.Node) {
					removed[c.Node] = true
					cands = append(cands, c)
				}
			}
			stranded := m.stranded(movingPods(snap, removed), m.targets(removed, nil))
			if len(stranded) == 0 {
				t.Fatal("no pod strands: the case tests nothing")
			}
			fresh := scheduling.Snapshot{NodePools: snap.NodePools}
			for _, p := range stranded {
				fresh.Pods = append(fresh.Pods, unbound(p))
			}
			want := scheduling.Solve(fresh, scheduling.Options{}).TotalPrice()
			for i := range 2 {
				if got := m.risk(cands, nil); got != want {
					t.Fatalf("risk %d: %v, want %v", i+1, got, want)
				}
				if m.shared == nil {
					t.Fatalf("risk %d made its plan without the shared part", i+1)
				}
			}
		})
	}
}
