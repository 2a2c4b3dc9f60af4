package simulate

import (
	"fmt"
	"math"
	"math/rand"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Generators are the built-in traces, by name.
var Generators = []string{"diurnal", "burst", "walk"}

// Generate is a named trace over duration peaking near peak pods. It scales
// objs' Deployments; when there are none it adds 20 of assorted shapes
// (returned, so that they can be written beside the trace). The seed picks
// shapes and noise.
func Generate(name string, objs *manifests.Objects, peak int, duration time.Duration, seed int64) (*Trace, []any, error) {
	if peak <= 0 {
		return nil, nil, fmt.Errorf("--peak %d: must be positive", peak)
	}
	if duration <= 0 {
		return nil, nil, fmt.Errorf("--duration %s: must be positive, such as 24h", duration)
	}
	rng := rand.New(rand.NewSource(seed))
	var added []any
	deployments := objs.Deployments
	if len(deployments) == 0 {
		for i := 0; i < 20; i++ {
			d := syntheticDeployment(i, rng)
			added = append(added, d)
			deployments = append(deployments, d)
		}
		objs.Deployments = deployments
	}
	// Each Deployment's share of the peak.
	weights := make([]float64, len(deployments))
	total := 0.0
	for i := range weights {
		weights[i] = 0.5 + rng.Float64()
		total += weights[i]
	}
	shares := make([]float64, len(deployments))
	for i := range shares {
		shares[i] = float64(peak) * weights[i] / total
	}
	t := &Trace{Duration: metav1.Duration{Duration: duration}}
	step := 5 * time.Minute
	scale := func(at time.Duration, i int, replicas int) {
		d := deployments[i]
		t.Events = append(t.Events, Event{At: metav1.Duration{Duration: at}, Scale: &Scale{Deployment: d.Namespace + "/" + d.Name, Replicas: replicas}})
	}
	switch name {
	case "diurnal":
		// Low at midnight, the peak at noon; each Deployment with a little
		// noise of its own.
		for at := time.Duration(0); at < duration; at += step {
			level := 0.2 + 0.8*(1-math.Cos(2*math.Pi*at.Hours()/24))/2
			for i := range deployments {
				noise := 1 + 0.04*(rng.Float64()-0.5)
				scale(at, i, int(math.Round(math.Min(shares[i], shares[i]*level*noise))))
			}
		}
	case "walk":
		level := make([]float64, len(deployments))
		for i := range level {
			level[i] = 0.5
		}
		for at := time.Duration(0); at < duration; at += step {
			for i := range deployments {
				level[i] = math.Max(0.05, math.Min(1, level[i]+0.1*(rng.Float64()-0.5)))
				scale(at, i, int(math.Round(shares[i]*level[i])))
			}
		}
	case "burst":
		// A steady 30% of the peak, and every two hours a batch of Jobs
		// for the rest, running 20 to 60 minutes.
		for i := range deployments {
			scale(0, i, int(math.Round(shares[i]*0.3)))
		}
		job := syntheticJob(rng)
		added = append(added, job)
		objs.Jobs = append(objs.Jobs, job)
		for at := 30 * time.Minute; at < duration; at += 2 * time.Hour {
			run := time.Duration(20+rng.Intn(41)) * time.Minute
			t.Events = append(t.Events, Event{At: metav1.Duration{Duration: at},
				Job: &JobRun{Job: job.Namespace + "/" + job.Name, Pods: int(float64(peak) * 0.7), RunFor: metav1.Duration{Duration: run}}})
		}
	default:
		return nil, nil, fmt.Errorf("--generate %q: use one of diurnal, burst or walk", name)
	}
	return t, added, nil
}

// shapes are the generated workloads' requests: CPU and GiB per CPU, as
// web, worker and cache services have them.
var shapes = []struct {
	cpu    string
	memGiB float64
}{{"250m", 0.5}, {"500m", 1}, {"500m", 2}, {"1", 2}, {"1", 4}, {"2", 4}, {"2", 8}, {"4", 8}, {"1", 1}, {"4", 16}}

func syntheticDeployment(i int, rng *rand.Rand) *appsv1.Deployment {
	sh := shapes[rng.Intn(len(shapes))]
	name := fmt.Sprintf("app-%02d", i)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels, sh.cpu, sh.memGiB)},
	}
}

func syntheticJob(rng *rand.Rand) *batchv1.Job {
	sh := shapes[rng.Intn(len(shapes))]
	labels := map[string]string{"job": "batch"}
	tmpl := podTemplate(labels, sh.cpu, sh.memGiB)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: "default"},
		Spec:       batchv1.JobSpec{Parallelism: ptr.To[int32](1), Template: tmpl},
	}
}

func podTemplate(labels map[string]string, cpu string, memPerCPU float64) corev1.PodTemplateSpec {
	c := resource.MustParse(cpu)
	mem := resource.NewQuantity(int64(float64(c.MilliValue())/1000*memPerCPU*(1<<30)), resource.BinarySI)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: c, corev1.ResourceMemory: *mem}}}}},
	}
}
