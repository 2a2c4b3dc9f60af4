package resources

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSharedExtendedResources: Add and Sub share a map of extended
// resources when the other side has none, so nothing may write one once
// made: AddList copies before its first write, and every operation leaves
// its operands as they were.
func TestSharedExtendedResources(t *testing.T) {
	eni := corev1.ResourceName("vpc.amazonaws.com/pod-eni")
	gpu := corev1.ResourceName("nvidia.com/gpu")
	node := FromResourceList(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), eni: resource.MustParse("9")})
	pod := Resources{CPU: 500, Pods: 1}
	cases := []struct {
		name string
		op   func() Resources
		want map[corev1.ResourceName]int64
	}{
		{"add nothing extended", func() Resources { return node.Add(pod) }, map[corev1.ResourceName]int64{eni: 9}},
		{"sub nothing extended", func() Resources { return node.Sub(pod) }, map[corev1.ResourceName]int64{eni: 9}},
		{"add to none", func() Resources { return pod.Add(node) }, map[corev1.ResourceName]int64{eni: 9}},
		{"a list added to a shared sum", func() Resources {
			r := node.Add(pod)
			r.AddList(corev1.ResourceList{gpu: resource.MustParse("1"), eni: resource.MustParse("1")})
			return r
		}, map[corev1.ResourceName]int64{eni: 10, gpu: 1}},
		{"both extended", func() Resources { return node.Add(Resources{Ext: map[corev1.ResourceName]int64{gpu: 2}}) }, map[corev1.ResourceName]int64{eni: 9, gpu: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.op()
			if !reflect.DeepEqual(got.Ext, c.want) {
				t.Errorf("extended %v; want %v", got.Ext, c.want)
			}
			if want := map[corev1.ResourceName]int64{eni: 9}; !reflect.DeepEqual(node.Ext, want) || pod.Ext != nil {
				t.Errorf("an operand changed: node %v (want %v), pod %v (want none)", node.Ext, want, pod.Ext)
			}
		})
	}
}
