package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestGroupKey: pods that differ only in name share a group; a difference
// in any field a placement reads parts them.
func TestGroupKey(t *testing.T) {
	base := func() *corev1.Pod {
		p := mkPod("a", "1", "1Gi", withLabels("app", "web"))
		p.Spec.NodeSelector = map[string]string{"k": "v"}
		p.Spec.Tolerations = []corev1.Toleration{{Key: "t", Operator: corev1.TolerationOpExists}}
		return p
	}
	cases := []struct {
		name   string
		change func(p *corev1.Pod)
		same   bool
	}{
		{"another name", func(p *corev1.Pod) { p.Name = "b" }, true},
		{"labels in another order of insertion", func(p *corev1.Pod) {
			p.Labels = map[string]string{"x": "1"}
			p.Labels["app"] = "web"
			delete(p.Labels, "x")
		}, true},
		{"namespace", func(p *corev1.Pod) { p.Namespace = "other" }, false},
		{"a label value", func(p *corev1.Pod) { p.Labels["app"] = "api" }, false},
		{"a label moved into the node selector", func(p *corev1.Pod) {
			delete(p.Labels, "app")
			p.Spec.NodeSelector["app"] = "web"
		}, false},
		{"node selector", func(p *corev1.Pod) { p.Spec.NodeSelector["k"] = "w" }, false},
		{"affinity", func(p *corev1.Pod) { podAntiAffinity(corev1.LabelHostname, map[string]string{"app": "web"})(p) }, false},
		{"toleration", func(p *corev1.Pod) { p.Spec.Tolerations[0].Key = "u" }, false},
		{"no toleration", func(p *corev1.Pod) { p.Spec.Tolerations = nil }, false},
		{"spread", func(p *corev1.Pod) { spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "web"})(p) }, false},
		{"requests", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}, false},
		{"host port", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 80, ContainerPort: 80}}
		}, false},
		{"an init container", func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "init"}} }, false},
		{"the container moved to init", func(p *corev1.Pod) {
			p.Spec.InitContainers, p.Spec.Containers = p.Spec.Containers, nil
		}, false},
		{"overhead", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		}, false},
		{"pod-level resources", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := base()
			c.change(p)
			if same := groupKey(p) == groupKey(base()); same != c.same {
				t.Errorf("same group: %v, want %v", same, c.same)
			}
		})
	}
}
