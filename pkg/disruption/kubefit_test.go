package disruption

import (
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKubeFits(t *testing.T) {
	target := func(name, cpu string, taints ...corev1.Taint) kubeNode {
		free := resources.FromResourceList(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")})
		return kubeNode{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": name}}, Spec: corev1.NodeSpec{Taints: taints}}, alloc: free, free: free}
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
