package operator

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/explain"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCacheTransform(t *testing.T) {
	container := func() corev1.Container {
		return corev1.Container{
			Name: "app", Image: "app:1", Command: []string{"/app"}, Args: []string{"--big"}, WorkingDir: "/w",
			Env:          []corev1.EnvVar{{Name: "A", Value: strings.Repeat("x", 1000)}},
			EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			Ports:        []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
			LivenessProbe: &corev1.Probe{}, ReadinessProbe: &corev1.Probe{}, StartupProbe: &corev1.Probe{}, Lifecycle: &corev1.Lifecycle{},
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "a"},
			Annotations:   map[string]string{lastApplied: "{...}", "karpenter.sh/do-not-disrupt": "true"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{container()}, Containers: []corev1.Container{container()},
			EphemeralContainers: []corev1.EphemeralContainer{{}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "ebs", VolumeSource: corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1"}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			Affinity:    &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/1700 nodes are available: " + strings.Repeat("x", 300)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}, InitContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"app:1"}, SizeBytes: 1 << 20}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if _, err := cacheTransform(pod); err != nil {
		t.Fatal(err)
	}
	if _, err := cacheTransform(node); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"pod managed fields dropped", pod.ManagedFields == nil},
		{"node managed fields dropped", node.ManagedFields == nil},
		{"last-applied dropped", pod.Annotations[lastApplied] == ""},
		{"other annotations kept", pod.Annotations["karpenter.sh/do-not-disrupt"] == "true"},
		{"labels kept", pod.Labels["app"] == "a"},
		{"ephemeral containers dropped", pod.Spec.EphemeralContainers == nil},
		{"claims and attaching volumes kept, the rest dropped", len(pod.Spec.Volumes) == 3 && pod.Spec.Volumes[0].Name == "data" && pod.Spec.Volumes[1].Name == "scratch" && pod.Spec.Volumes[2].Name == "ebs"},
		{"the dropped volumes not kept behind the slice", cap(pod.Spec.Volumes) == len(pod.Spec.Volumes)},
		{"container statuses dropped", pod.Status.ContainerStatuses == nil && pod.Status.InitContainerStatuses == nil},
		{"tolerations kept", len(pod.Spec.Tolerations) == 1},
		{"affinity kept", pod.Spec.Affinity != nil},
		{"status kept", pod.Status.Phase == corev1.PodPending && len(pod.Status.Conditions) == 1},
		{"conditions keep type, status and reason", pod.Status.Conditions[0].Type == corev1.PodScheduled && pod.Status.Conditions[0].Status == corev1.ConditionFalse && pod.Status.Conditions[0].Reason == corev1.PodReasonUnschedulable},
		{"condition messages dropped", pod.Status.Conditions[0].Message == ""},
		{"node images dropped", node.Status.Images == nil},
		{"node conditions kept", len(node.Status.Conditions) == 1},
		{"the results read as trimmed", trimmed(pod) && trimmed(node)},
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		checks = append(checks,
			struct {
				name string
				ok   bool
			}{"kubelet-only container fields dropped", c.Env == nil && c.EnvFrom == nil && c.Command == nil && c.Args == nil && c.WorkingDir == "" &&
				c.VolumeMounts == nil && c.LivenessProbe == nil && c.ReadinessProbe == nil && c.StartupProbe == nil && c.Lifecycle == nil},
			struct {
				name string
				ok   bool
			}{"requests, ports and image kept", c.Resources.Requests.Cpu().String() == "1" && len(c.Ports) == 1 && c.Ports[0].HostPort == 8080 && c.Image == "app:1"},
			struct {
				name string
				ok   bool
			}{"limits dropped", c.Resources.Limits == nil},
		)
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: pod %+v", c.name, pod)
		}
	}
}

func TestProfiling(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
	}{{"", http.StatusNotFound}, {"false", http.StatusNotFound}, {"true", http.StatusOK}} {
		t.Run("ENABLE_PROFILING="+tc.env, func(t *testing.T) {
			o, err := Parse(nil, func(k string) string {
				if k == "ENABLE_PROFILING" {
					return tc.env
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			for path, h := range metricsOptions(o, &explain.Board{}).ExtraHandlers {
				mux.Handle(path, h)
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
			if rec.Code != tc.want {
				t.Fatalf("GET /debug/pprof/ = %d, want %d", rec.Code, tc.want)
			}
			if tc.want == http.StatusOK && !strings.Contains(rec.Body.String(), "goroutine") {
				t.Errorf("the pprof index lists no goroutine profile: %.200s", rec.Body.String())
			}
			// The disruption controller's word on each node is served
			// either way, for `joiner explain`.
			rec = httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, explain.Path, nil))
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"nodes"`) {
				t.Errorf("GET %s = %d %.200s, want the board", explain.Path, rec.Code, rec.Body.String())
			}
		})
	}
}

// TestTrimmedAgreesWithTheTransform: trimmed must report false for an
// object carrying any one field cacheTransform clears, or that field
// stays in the cache; and true for whatever cacheTransform returns, or the
// transform writes again to objects a relist hands back from the cache,
// which every reader shares.
func TestTrimmedAgreesWithTheTransform(t *testing.T) {
	withContainer := func(f func(*corev1.Container)) *corev1.Pod {
		c := corev1.Container{Name: "app", Image: "app:1"}
		f(&c)
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	}
	withInit := func(f func(*corev1.Container)) *corev1.Pod {
		p := withContainer(func(*corev1.Container) {})
		c := corev1.Container{Name: "init"}
		f(&c)
		p.Spec.InitContainers = []corev1.Container{c}
		return p
	}
	cases := []struct {
		name string
		obj  any
	}{
		{"managed fields", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{}}}}},
		{"last-applied", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lastApplied: ""}}}},
		{"command", withContainer(func(c *corev1.Container) { c.Command = []string{"/app"} })},
		{"args", withContainer(func(c *corev1.Container) { c.Args = []string{} })},
		{"working dir", withContainer(func(c *corev1.Container) { c.WorkingDir = "/w" })},
		{"env", withContainer(func(c *corev1.Container) { c.Env = []corev1.EnvVar{} })},
		{"envFrom", withContainer(func(c *corev1.Container) { c.EnvFrom = []corev1.EnvFromSource{} })},
		{"volume mounts", withContainer(func(c *corev1.Container) { c.VolumeMounts = []corev1.VolumeMount{} })},
		{"volume devices", withContainer(func(c *corev1.Container) { c.VolumeDevices = []corev1.VolumeDevice{} })},
		{"liveness probe", withContainer(func(c *corev1.Container) { c.LivenessProbe = &corev1.Probe{} })},
		{"readiness probe", withContainer(func(c *corev1.Container) { c.ReadinessProbe = &corev1.Probe{} })},
		{"startup probe", withContainer(func(c *corev1.Container) { c.StartupProbe = &corev1.Probe{} })},
		{"lifecycle", withContainer(func(c *corev1.Container) { c.Lifecycle = &corev1.Lifecycle{} })},
		{"termination message path", withContainer(func(c *corev1.Container) { c.TerminationMessagePath = "/dev/termination-log" })},
		{"limits", withContainer(func(c *corev1.Container) { c.Resources.Limits = corev1.ResourceList{} })},
		{"an init container's env", withInit(func(c *corev1.Container) { c.Env = []corev1.EnvVar{} })},
		{"ephemeral containers", &corev1.Pod{Spec: corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{}}}},
		{"a config map volume", &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}}}}},
		{"container statuses", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{}}}},
		{"init container statuses", &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{}}}},
		{"ephemeral container statuses", &corev1.Pod{Status: corev1.PodStatus{EphemeralContainerStatuses: []corev1.ContainerStatus{}}}},
		{"a condition's message", &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady}, {Type: corev1.PodScheduled, Message: "0/3 nodes"}}}}},
		{"node managed fields", &corev1.Node{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{}}}}},
		{"node images", &corev1.Node{Status: corev1.NodeStatus{Images: []corev1.ContainerImage{}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if trimmed(tc.obj) {
				t.Errorf("trimmed before the transform: %+v", tc.obj)
			}
			out, err := cacheTransform(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if !trimmed(out) {
				t.Errorf("not trimmed after the transform: %+v", out)
			}
		})
	}
	kept := []struct {
		name string
		obj  any
	}{
		{"a pod with nothing to trim", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": "b"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Reason: corev1.PodReasonUnschedulable}}}}},
		{"a node with nothing to trim", &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady}}}}},
		{"a namespace", &corev1.Namespace{}},
	}
	for _, tc := range kept {
		if !trimmed(tc.obj) {
			t.Errorf("%s: not trimmed, though the transform has nothing to clear", tc.name)
		}
	}
}
