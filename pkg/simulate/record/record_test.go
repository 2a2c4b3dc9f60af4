package record

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/simulate"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

var t0 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "7",
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "1", "team": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}},
	}
}

func aJob(name string, done *time.Time) *batchv1.Job {
	j := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "x"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"batch.kubernetes.io/controller-uid": "x", "job-name": name, "kind": "batch"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "pause",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}}}}
	if done != nil {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: "True"}}
		j.Status.CompletionTime = &metav1.Time{Time: *done}
	}
	return j
}

func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	d := deployment(name, replicas)
	return &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: d.ObjectMeta,
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Selector: d.Spec.Selector, Template: d.Spec.Template, ServiceName: name,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", ResourceVersion: "3"},
				Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}}}}
}

func lonePod(name string) *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "ip-10-0-0-1", Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
}

// line is one audit event: a successful write at ResponseComplete, its
// body as the response (full) or only the request.
func line(t *testing.T, at time.Duration, verb, group, resource, sub, name string, body any, responseBody bool) string {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ev := auditv1.Event{Stage: auditv1.StageResponseComplete, Verb: verb, StageTimestamp: metav1.NewMicroTime(t0.Add(at)),
		ObjectRef:      &auditv1.ObjectReference{APIGroup: group, Resource: resource, Subresource: sub, Namespace: "default", Name: name},
		ResponseStatus: &metav1.Status{Code: 200}}
	if responseBody {
		ev.ResponseObject = &runtime.Unknown{Raw: raw}
	} else {
		ev.RequestObject = &runtime.Unknown{Raw: raw}
	}
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestReadAudit: an audit log's writes become the trace's events and the
// manifests they refer to, which the simulator accepts as they are.
func TestReadAudit(t *testing.T) {
	done := t0.Add(50 * time.Minute)
	cases := []struct {
		name       string
		lines      func(t *testing.T) []string
		wantEvents []string
		wantErr    string
	}{{
		name: "a Deployment created, scaled through its scale subresource, then patched",
		lines: func(t *testing.T) []string {
			return []string{
				line(t, 0, "create", "apps", "deployments", "", "web", deployment("web", 3), true),
				line(t, 10*time.Minute, "update", "apps", "deployments", "scale", "web", map[string]any{"spec": map[string]any{"replicas": 8}}, true),
				line(t, 20*time.Minute, "patch", "apps", "deployments", "", "web", map[string]any{"spec": map[string]any{"replicas": 2}}, false),
				// The same count again changes nothing.
				line(t, 25*time.Minute, "patch", "apps", "deployments", "", "web", map[string]any{"spec": map[string]any{"replicas": 2}}, false),
			}
		},
		wantEvents: []string{"0s scale default/web 3", "10m0s scale default/web 8", "20m0s scale default/web 2"},
	}, {
		name: "a Job runs from its creation to its completion",
		lines: func(t *testing.T) []string {
			return []string{
				line(t, 0, "create", "apps", "deployments", "", "web", deployment("web", 1), true),
				line(t, 5*time.Minute, "create", "batch", "jobs", "", "nightly", aJob("nightly", nil), true),
				line(t, 50*time.Minute, "update", "batch", "jobs", "status", "nightly", aJob("nightly", &done), true),
				line(t, time.Hour, "patch", "apps", "deployments", "", "web", map[string]any{"spec": map[string]any{"replicas": 2}}, false),
			}
		},
		wantEvents: []string{"0s scale default/web 1", "5m0s job default/nightly 4 for 45m0s", "1h0m0s scale default/web 2"},
	}, {
		name: "a NodePool changed mid-way is an apply event, deleted a delete event",
		lines: func(t *testing.T) []string {
			np := `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"default"},"spec":{"template":{"spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["%s"]}]}}}}`
			var first, second map[string]any
			_ = json.Unmarshal([]byte(strings.Replace(np, "%s", "on-demand", 1)), &first)
			_ = json.Unmarshal([]byte(strings.Replace(np, "%s", "spot", 1)), &second)
			var gpu map[string]any
			_ = json.Unmarshal([]byte(strings.Replace(strings.Replace(np, "%s", "spot", 1), `"name":"default"}`, `"name":"gpu"}`, 1)), &gpu)
			return []string{
				line(t, 0, "create", "karpenter.sh", "nodepools", "", "default", first, true),
				line(t, 0, "create", "apps", "deployments", "", "web", deployment("web", 1), true),
				line(t, 10*time.Minute, "create", "karpenter.sh", "nodepools", "", "gpu", gpu, true),
				line(t, 30*time.Minute, "update", "karpenter.sh", "nodepools", "", "default", second, true),
				// A merge patch at level Request is only a part of it.
				line(t, 40*time.Minute, "patch", "karpenter.sh", "nodepools", "", "default", map[string]any{"spec": map[string]any{"limits": map[string]any{"cpu": "10"}}}, false),
				// Deleted, its nodes go with it; made again, it is new.
				line(t, 50*time.Minute, "delete", "karpenter.sh", "nodepools", "", "gpu", map[string]any{}, false),
				line(t, 55*time.Minute, "create", "karpenter.sh", "nodepools", "", "gpu", gpu, true),
			}
		},
		wantEvents: []string{"0s scale default/web 1", "10m0s apply NodePool gpu", "30m0s apply NodePool default", "50m0s delete NodePool gpu", "55m0s apply NodePool gpu"},
	}, {
		name: "deletions, and patches that are not the object",
		lines: func(t *testing.T) []string {
			return []string{
				line(t, 0, "create", "apps", "deployments", "", "web", deployment("web", 3), true),
				// kubectl set image: a strategic merge patch with containers,
				// which must not read as the whole Deployment at 1 replica.
				line(t, 5*time.Minute, "patch", "apps", "deployments", "", "web", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "pause:2"}}}}}}, false),
				// A JSON patch is operations, not the object.
				line(t, 6*time.Minute, "patch", "apps", "deployments", "", "web", []any{map[string]any{"op": "replace", "path": "/spec/replicas", "value": 9}}, false),
				line(t, 7*time.Minute, "create", "batch", "jobs", "", "nightly", aJob("nightly", nil), true),
				line(t, 9*time.Minute, "delete", "batch", "jobs", "", "nightly", map[string]any{}, false),
				line(t, 20*time.Minute, "delete", "apps", "deployments", "", "web", map[string]any{}, false),
			}
		},
		wantEvents: []string{"0s scale default/web 3", "7m0s job default/nightly 4 for 2m0s", "20m0s delete Deployment default/web"},
	}, {
		name: "a Deployment's new template is a roll-out, held while it is paused; deleted and made again, it is new",
		lines: func(t *testing.T) []string {
			image := func(d *appsv1.Deployment, image string, paused bool) *appsv1.Deployment {
				d.Spec.Template.Spec.Containers[0].Image, d.Spec.Paused = image, paused
				return d
			}
			return []string{
				line(t, 0, "create", "apps", "deployments", "", "web", deployment("web", 3), true),
				line(t, 5*time.Minute, "update", "apps", "deployments", "", "web", image(deployment("web", 3), "pause:2", false), true),
				// Only the replicas: a scale, not a roll-out.
				line(t, 8*time.Minute, "update", "apps", "deployments", "", "web", image(deployment("web", 5), "pause:2", false), true),
				line(t, 10*time.Minute, "update", "apps", "deployments", "", "web", image(deployment("web", 5), "pause:3", true), true),
				line(t, 12*time.Minute, "update", "apps", "deployments", "", "web", image(deployment("web", 5), "pause:3", false), true),
				line(t, 20*time.Minute, "delete", "apps", "deployments", "", "web", map[string]any{}, false),
				// The same spec as before its deletion: new all the same.
				line(t, 30*time.Minute, "create", "apps", "deployments", "", "web", image(deployment("web", 2), "pause:3", false), true),
			}
		},
		wantEvents: []string{"0s scale default/web 3", "5m0s apply Deployment web", "8m0s scale default/web 5", "12m0s apply Deployment web",
			"20m0s delete Deployment default/web", "30m0s apply Deployment web"},
	}, {
		name: "a StatefulSet created and scaled, and bare Pods that come and go",
		lines: func(t *testing.T) []string {
			owned := lonePod("owned")
			owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u", Controller: ptr.To(true)}}
			return []string{
				line(t, 0, "create", "apps", "statefulsets", "", "db", statefulSet("db", 2), true),
				line(t, 10*time.Minute, "update", "apps", "statefulsets", "scale", "db", map[string]any{"spec": map[string]any{"replicas": 3}}, true),
				line(t, 12*time.Minute, "create", "", "pods", "", "lone", lonePod("lone"), false),
				// A controller's pod is its workload's, not an event.
				line(t, 13*time.Minute, "create", "", "pods", "", "owned", owned, false),
				line(t, 14*time.Minute, "delete", "", "pods", "", "owned", map[string]any{}, false),
				line(t, 15*time.Minute, "delete", "", "pods", "", "lone", map[string]any{}, false),
				line(t, 20*time.Minute, "delete", "apps", "statefulsets", "", "db", map[string]any{}, false),
			}
		},
		wantEvents: []string{"0s scale default/db 2", "10m0s scale default/db 3", "12m0s apply Pod lone", "15m0s delete Pod default/lone", "20m0s delete StatefulSet default/db"},
	}, {
		name: "a log without the writes' bodies",
		lines: func(t *testing.T) []string {
			return []string{`{"stage":"ResponseComplete","verb":"get","stageTimestamp":"2026-12-07T09:00:00.000000Z"}`}
		},
		wantErr: "log them at level Request or RequestResponse",
	}, {
		name:    "not an audit log",
		lines:   func(t *testing.T) []string { return []string{"web-1 Running"} },
		wantErr: "audit log line 1",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, end, err := ReadAudit(strings.NewReader(strings.Join(tc.lines(t), "\n")))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			trace, workload, config, err := rec.Finish(end.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range trace.Events {
				got = append(got, describe(e))
			}
			if strings.Join(got, "; ") != strings.Join(tc.wantEvents, "; ") {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.wantEvents, "\n"))
			}
			checkReplayable(t, trace, append(workload, config...))
		})
	}
}

func describe(e simulate.Event) string {
	switch {
	case e.Scale != nil:
		return e.At.Duration.String() + " scale " + e.Scale.Deployment + e.Scale.StatefulSet + " " + itoa(e.Scale.Replicas)
	case e.Delete != nil:
		return e.At.Duration.String() + " delete " + e.Delete.Kind + " " + e.Delete.Name
	case e.Job != nil:
		return e.At.Duration.String() + " job " + e.Job.Job + " " + itoa(e.Job.Pods) + " for " + e.Job.RunFor.Duration.String()
	case e.Apply != "":
		var obj metav1.PartialObjectMetadata
		_ = yaml.Unmarshal([]byte(e.Apply), &obj)
		return e.At.Duration.String() + " apply " + obj.Kind + " " + obj.Name
	}
	return "?"
}

func itoa(n int) string { raw, _ := json.Marshal(n); return string(raw) }

// checkReplayable writes the manifests as `joiner simulate record` does
// and checks that the trace's events name objects in them, as a run's
// validation requires, and that the bookkeeping was left out.
func checkReplayable(t *testing.T, trace *simulate.Trace, objs []any) {
	t.Helper()
	var docs []string
	for _, o := range objs {
		raw, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(raw))
	}
	text := strings.Join(docs, "---\n")
	for _, junk := range []string{"resourceVersion", "deployment.kubernetes.io/revision", "controller-uid", "job-name"} {
		if strings.Contains(text, junk) {
			t.Errorf("the manifests keep %s:\n%s", junk, text)
		}
	}
	if !strings.Contains(text, "kind: NodePool") {
		text += "---\n" + `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
`
	}
	// A class made before the recording is not in an audit log: the user
	// gives it with -f, as here.
	if !regexp.MustCompile(`(?m)^kind: EC2NodeClass`).MatchString(text) {
		text += "---\n" + `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {amiSelectorTerms: [{alias: al2023@latest}], role: r}
`
	}
	parsed, err := manifests.Parse("recorded", strings.NewReader(text))
	if err != nil {
		t.Fatalf("the recorded manifests do not load: %v\n%s", err, text)
	}
	if err := trace.Validate(parsed); err != nil {
		t.Errorf("the trace does not validate against its manifests: %v", err)
	}
}

// TestJobs: a Job is a job event from its creation, or from the start when
// it was running before, to its end; one that ended before the start is
// not in the trace, however often it is seen again (a watch's resync).
func TestJobs(t *testing.T) {
	before, ended := t0.Add(-time.Hour), t0.Add(30*time.Minute)
	early := t0.Add(-10 * time.Minute)
	cases := []struct {
		name string
		job  func() *batchv1.Job
		seen []time.Duration
		want string
	}{
		{name: "running before the start", seen: []time.Duration{0, 30 * time.Minute},
			job:  func() *batchv1.Job { j := aJob("a", nil); j.CreationTimestamp = metav1.NewTime(before); return j },
			want: "0s job default/a 4 for 30m0s"},
		{name: "ended before the start, seen again later", seen: []time.Duration{0, 20 * time.Minute},
			job:  func() *batchv1.Job { j := aJob("a", &early); j.CreationTimestamp = metav1.NewTime(before); return j },
			want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := New(t0)
			for i, at := range tc.seen {
				j := tc.job()
				if i == len(tc.seen)-1 && j.Status.CompletionTime == nil {
					j = aJob("a", &ended)
					j.CreationTimestamp = metav1.NewTime(before)
				}
				rec.Job(t0.Add(at), j)
			}
			trace, _, _, err := rec.Finish(t0.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range trace.Events {
				got = append(got, describe(e))
			}
			if strings.Join(got, "; ") != tc.want {
				t.Errorf("events %q, want %q", strings.Join(got, "; "), tc.want)
			}
		})
	}
}
