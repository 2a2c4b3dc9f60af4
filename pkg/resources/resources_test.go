package resources

import (
	"reflect"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodRequestsMatchesTheHelper: the direct sum PodRequests takes for
// plain pods gives what Kubernetes' own helper gives, and pods it does not
// cover (init containers, pod-level requests) still go to the helper.
func TestPodRequestsMatchesTheHelper(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	container := func(req corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}
	}
	cases := []struct {
		name string
		spec corev1.PodSpec
	}{
		{"no requests", corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
		{"one container", corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "250m", "memory", "512Mi"))}}},
		{"two containers and extended", corev1.PodSpec{Containers: []corev1.Container{
			container(rl("cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "1", "ephemeral-storage", "2Gi")),
			container(rl("cpu", "1500m", "memory", "100M", "nvidia.com/gpu", "2"))}}},
		{"zero extended", corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1", "example.com/dongle", "0"))}}},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1"))}, Overhead: rl("cpu", "250m", "memory", "120Mi")}},
		{"init containers", corev1.PodSpec{InitContainers: []corev1.Container{container(rl("cpu", "4", "memory", "1Gi"))},
			Containers: []corev1.Container{container(rl("cpu", "1", "memory", "2Gi"))}}},
		{"pod-level requests", corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "3", "memory", "3Gi")},
			Containers: []corev1.Container{container(rl("cpu", "1"))}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: c.spec}
			want := FromResourceList(pods.Requests(pod))
			want.Pods = 1
			if got := PodRequests(pod); !reflect.DeepEqual(got, want) {
				t.Errorf("PodRequests = %+v, the helper gives %+v", got, want)
			}
		})
	}
}
