package buffers

import (
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func cpuPod(cpu string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}
}

// The counts of Karpenter v1.14.1's own unit tests, and the larger of
// replicas and percentage.
func TestCount(t *testing.T) {
	scalable := &v1beta1.ScalableRef{Kind: "Deployment", Name: "web"}
	tmpl := &v1beta1.LocalObjectRef{Name: "t"}
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	cases := []struct {
		name     string
		spec     v1beta1.CapacityBufferSpec
		pod      corev1.PodSpec
		workload *int32
		want     int32
	}{
		{"20% of 10", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Percentage: ptr(int32(20))}, cpuPod("1"), ptr(int32(10)), 2},
		{"25% of 10 rounds up", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Percentage: ptr(int32(25))}, cpuPod("1"), ptr(int32(10)), 3},
		{"10% of 1 is at least one", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Percentage: ptr(int32(10))}, cpuPod("1"), ptr(int32(1)), 1},
		{"a percentage of no replicas", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Percentage: ptr(int32(50))}, cpuPod("1"), ptr(int32(0)), 0},
		{"replicas 10 within 3 CPUs of 1-CPU pods", v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr(int32(10)), Limits: cpu("3")}, cpuPod("1"), nil, 3},
		{"replicas 3 within 10 CPUs", v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr(int32(3)), Limits: cpu("10")}, cpuPod("1"), nil, 3},
		{"limits alone", v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Limits: cpu("5")}, cpuPod("1"), nil, 5},
		{"the larger of replicas 5 and 80% of 10", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Replicas: ptr(int32(5)), Percentage: ptr(int32(80))}, cpuPod("1"), ptr(int32(10)), 8},
		{"and within 4 CPUs", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Replicas: ptr(int32(5)), Percentage: ptr(int32(80)), Limits: cpu("4")}, cpuPod("1"), ptr(int32(10)), 4},
		{"a percentage of a template is not counted", v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr(int32(2)), Percentage: ptr(int32(500))}, cpuPod("1"), nil, 2},
		{"limits on a resource the pod does not ask", v1beta1.CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr(int32(2)), Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}, cpuPod("1"), nil, 2},
		{"nothing asked", v1beta1.CapacityBufferSpec{ScalableRef: scalable}, cpuPod("1"), ptr(int32(3)), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Count(tc.spec, tc.pod, tc.workload); got != tc.want {
				t.Fatalf("%d, want %d", got, tc.want)
			}
		})
	}
}

// Virtual pods look pending, carry the template's labels and the buffer's
// annotations, have the lowest priority and no claimed volumes; a plan's
// tallies find them.
func TestPodsAndTallies(t *testing.T) {
	b := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "buf", Namespace: "team", UID: "u"}}
	spec := cpuPod("1")
	spec.NodeName = "taken"
	spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/d"}, {Name: "config", MountPath: "/c"}}
	pods := Pods(b, corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: spec}, 3, time.Now())
	if len(pods) != 3 || pods[2].Name != "capacity-buffer-buf-3" || pods[0].Namespace != "team" {
		t.Fatalf("pods %d, names %s", len(pods), pods[len(pods)-1].Name)
	}
	p := pods[0]
	if !IsVirtual(p) || Owner(p) != "team/buf" || p.Labels["app"] != "web" || p.Spec.NodeName != "" || *p.Spec.Priority != -2147483648 ||
		len(p.Spec.Volumes) != 1 || len(p.Spec.Containers[0].VolumeMounts) != 1 || p.Status.Conditions[0].Reason != corev1.PodReasonUnschedulable {
		t.Fatalf("virtual pod %+v", p)
	}
	plan := &scheduling.Plan{Existing: map[string]string{"team/capacity-buffer-buf-1": "node-a"},
		NewNodeClaims: []*scheduling.NewNodeClaim{{Pods: []*corev1.Pod{pods[1]}}},
		Unschedulable: []scheduling.PodError{{Pod: pods[2]}}}
	got := Tallies(plan, pods)["team/buf"]
	if got == nil || *got != (Tally{Existing: 1, New: 1, Failed: 1}) {
		t.Fatalf("tally %+v", got)
	}
	s := &Store{}
	if !s.Set("team/buf", pods) || s.Set("team/buf", pods) || len(s.All()) != 3 || !s.Set("team/buf", nil) || len(s.All()) != 0 {
		t.Fatal("the store does not report its changes")
	}
}
