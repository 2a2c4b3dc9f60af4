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
	return Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"name": name}}, Spec: corev1.NodeSpec{Taints: taints}},
		Alloc: alloc, Free: alloc.Sub(used)}
}

func pod(cpu, mem string) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
}

// TestPick: kube-scheduler's default profile sends a pod to the node with
// the most room left after it (least allocated), weighs CPU against
// memory (balanced), and filters on room, selectors and taints.
func TestPick(t *testing.T) {
	noSchedule := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	selecting := pod("1", "1Gi")
	selecting.Spec.NodeSelector = map[string]string{"name": "b"}
	cases := []struct {
		name  string
		pod   *corev1.Pod
		nodes []Node
		want  int
	}{
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
			if got := Pick(tc.pod, resources.PodRequests(tc.pod), tc.nodes); got != tc.want {
				t.Errorf("Pick = %d, want %d", got, tc.want)
			}
		})
	}
}
