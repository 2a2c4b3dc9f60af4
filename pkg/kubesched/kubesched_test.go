package kubesched

import (
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, cpu, mem, usedCPU, usedMem string, taints ...corev1.Taint) Node {
	alloc := resources.FromResourceList(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")})
	used := resources.FromResourceList(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(usedCPU), corev1.ResourceMemory: resource.MustParse(usedMem)})
	return Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"name": name, corev1.LabelHostname: name}}, Spec: corev1.NodeSpec{Taints: taints}},
		Alloc: alloc, Free: alloc.Sub(used)}
}

func pod(cpu, mem string) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
}

// TestPick: kube-scheduler's default profile sends a pod to the node with
// the most room left after it (least allocated), weighs CPU against
// memory (balanced), away from its siblings (the system's default
// spreading), to its preferred nodes and off PreferNoSchedule taints it
// does not tolerate, and filters on room, selectors and taints.
func TestPick(t *testing.T) {
	noSchedule := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	preferNot := corev1.Taint{Key: "team", Value: "web", Effect: corev1.TaintEffectPreferNoSchedule}
	selecting := pod("1", "1Gi")
	selecting.Spec.NodeSelector = map[string]string{"name": "b"}
	tolerating := pod("1", "1Gi")
	tolerating.Spec.Tolerations = []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectPreferNoSchedule}}
	preferring := pod("1", "1Gi")
	preferring.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		{Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "name", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}}}}}
	// a is emptier than b, but runs four of the pod's siblings.
	crowded := []Node{node("a", "4", "8Gi", "500m", "1Gi"), node("b", "4", "8Gi", "1", "2Gi")}
	zoned := func(n Node, zone string) Node {
		n.Node.Labels[corev1.LabelTopologyZone] = zone
		return n
	}
	// c is full, and runs five siblings in zone a: a's count, which makes
	// b's node the choice between two equal ones.
	zones := []Node{zoned(node("a", "4", "8Gi", "0", "0"), "a"), zoned(node("b", "4", "8Gi", "0", "0"), "b"), zoned(node("c", "4", "8Gi", "4", "8Gi"), "a")}
	cases := []struct {
		name     string
		pod      *corev1.Pod
		nodes    []Node
		siblings []int
		want     int
	}{
		{name: "away from its siblings, to a fuller node", pod: pod("1", "1Gi"), nodes: crowded, siblings: []int{4, 0}, want: 1},
		{name: "without an owner, no spreading: the emptier node", pod: pod("1", "1Gi"), nodes: crowded, want: 0},
		{name: "to the zone with fewer siblings, counted on nodes it cannot use", pod: pod("1", "1Gi"), nodes: zones, siblings: []int{0, 0, 5}, want: 1},
		{name: "off an untolerated PreferNoSchedule taint, to a fuller node", pod: pod("1", "1Gi"),
			nodes: []Node{node("a", "4", "8Gi", "0", "0", preferNot), node("b", "4", "8Gi", "2", "2Gi")}, want: 1},
		{name: "onto a PreferNoSchedule taint it tolerates", pod: tolerating,
			nodes: []Node{node("a", "4", "8Gi", "0", "0", preferNot), node("b", "4", "8Gi", "2", "2Gi")}, want: 0},
		{name: "to its preferred node, though fuller", pod: preferring,
			nodes: []Node{node("a", "4", "8Gi", "0", "0"), node("b", "4", "8Gi", "2", "2Gi")}, want: 1},
		{name: "the emptier node, not the fuller one a packer would choose", pod: pod("1", "1Gi"),
			nodes: []Node{node("a", "4", "8Gi", "3", "6Gi"), node("b", "4", "8Gi", "0", "0")}, want: 1},
		{name: "the larger empty node", pod: pod("1", "1Gi"),
			nodes: []Node{node("a", "2", "4Gi", "0", "0"), node("b", "8", "16Gi", "0", "0")}, want: 1},
		{name: "balanced: the node whose CPU and memory stay even", pod: pod("2", "1Gi"),
			nodes: []Node{node("a", "4", "8Gi", "2", "0"), node("b", "4", "8Gi", "0", "4Gi")}, want: 1},
		{name: "only where it fits", pod: pod("3", "1Gi"),
			nodes: []Node{node("a", "4", "8Gi", "2", "0"), node("b", "4", "8Gi", "0", "7500Mi")}, want: -1},
		{name: "not on an untolerated taint", pod: pod("1", "1Gi"),
			nodes: []Node{node("a", "4", "8Gi", "0", "0", noSchedule), node("b", "4", "8Gi", "2", "2Gi")}, want: 1},
		{name: "its node selector", pod: selecting,
			nodes: []Node{node("a", "8", "16Gi", "0", "0"), node("b", "4", "8Gi", "2", "2Gi")}, want: 1},
		{name: "the first of equals", pod: pod("1", "1Gi"),
			nodes: []Node{node("a", "4", "8Gi", "0", "0"), node("b", "4", "8Gi", "0", "0")}, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var siblings func(int) int
			if tc.siblings != nil {
				siblings = func(i int) int { return tc.siblings[i] }
			}
			if got := Pick(tc.pod, resources.PodRequests(tc.pod), tc.nodes, siblings); got != tc.want {
				t.Errorf("Pick = %d, want %d", got, tc.want)
			}
		})
	}
}
