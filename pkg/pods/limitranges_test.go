package pods

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWithLimitRanges(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	ranges := []corev1.LimitRange{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Default: rl("cpu", "2", "memory", "1Gi"), DefaultRequest: rl("cpu", "2", "memory", "1Gi")},
			{Type: corev1.LimitTypePod, Max: rl("cpu", "8")},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, DefaultRequest: rl("cpu", "7")},
		}}},
	}
	cases := []struct {
		name      string
		ns        string
		requests  corev1.ResourceList
		wantCPU   string
		wantMem   string
		unchanged bool
	}{
		{"nothing asked: the defaults", "default", nil, "2", "1Gi", false},
		{"a request kept", "default", rl("cpu", "500m"), "500m", "1Gi", false},
		{"another namespace's range", "kube-system", nil, "0", "0", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: tc.requests}}}}}
			got := WithLimitRanges(p, ranges)
			if (got == p) != tc.unchanged {
				t.Fatalf("returned the pod itself: %v, want %v", got == p, tc.unchanged)
			}
			r := Requests(got)
			if cpu, mem := r[corev1.ResourceCPU], r[corev1.ResourceMemory]; cpu.Cmp(resource.MustParse(tc.wantCPU)) != 0 || mem.Cmp(resource.MustParse(tc.wantMem)) != 0 {
				t.Errorf("requests cpu %s memory %s, want %s and %s", cpu.String(), mem.String(), tc.wantCPU, tc.wantMem)
			}
			if len(p.Spec.Containers[0].Resources.Limits) != 0 {
				t.Error("the input was changed")
			}
		})
	}
}

func TestDaemonSetPodDefaultsRequestsToLimits(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	cases := []struct {
		name             string
		requests, limits corev1.ResourceList
		wantCPU, wantMem string
	}{
		{"limits only: the limits", nil, rl("memory", "1Gi"), "0", "1Gi"},
		{"a request kept below its limit", rl("memory", "256Mi"), rl("memory", "1Gi", "cpu", "1"), "1", "256Mi"},
		{"neither: nothing", nil, nil, "0", "0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: tc.requests, Limits: tc.limits}}},
				Containers:     []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: tc.requests, Limits: tc.limits}}},
			}}}}
			r := Requests(DaemonSetPod(ds))
			if cpu, mem := r[corev1.ResourceCPU], r[corev1.ResourceMemory]; cpu.Cmp(resource.MustParse(tc.wantCPU)) != 0 || mem.Cmp(resource.MustParse(tc.wantMem)) != 0 {
				t.Errorf("requests cpu %s memory %s, want %s and %s", cpu.String(), mem.String(), tc.wantCPU, tc.wantMem)
			}
			if len(ds.Spec.Template.Spec.Containers[0].Resources.Requests) != len(tc.requests) {
				t.Error("the DaemonSet's template was changed")
			}
		})
	}
}

// Template applies the API server's two defaults in its order: a
// container's limits become its requests before a LimitRange's
// defaultRequest can.
func TestTemplate(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	ranges := []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Namespace: "team"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, DefaultRequest: rl("cpu", "250m", "memory", "256Mi")},
	}}}}
	cases := []struct {
		name             string
		namespace        string
		limits           corev1.ResourceList
		wantCPU, wantMem string
	}{
		{"limits first, then the range for the rest", "team", rl("memory", "1Gi"), "250m", "1Gi"},
		{"the range alone", "team", nil, "250m", "256Mi"},
		{"another namespace: limits only", "other", rl("memory", "1Gi"), "0", "1Gi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: tc.limits}}}}}
			got := Template(tmpl, tc.namespace, ranges)
			r := Requests(&corev1.Pod{Spec: got.Spec})
			if cpu, mem := r[corev1.ResourceCPU], r[corev1.ResourceMemory]; cpu.Cmp(resource.MustParse(tc.wantCPU)) != 0 || mem.Cmp(resource.MustParse(tc.wantMem)) != 0 {
				t.Errorf("requests cpu %s memory %s, want %s and %s", cpu.String(), mem.String(), tc.wantCPU, tc.wantMem)
			}
			if tmpl.Spec.Containers[0].Resources.Requests != nil {
				t.Error("the template was changed")
			}
		})
	}
}
