package scheduling

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchInstanceTypes are the 400 synthetic types of Karpenter's scheduling
// benchmark: type n has n cpu, 2n GiB and 10n pods (less 100m and 10Mi of
// overhead) at 0.3147483648·n $/h, spot and on-demand in zones 1 and 2 and
// on-demand only in zone 3.
func benchInstanceTypes() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for n := 1; n <= 400; n++ {
		price := 0.3147483648 * float64(n)
		name := fmt.Sprintf("fake-it-%d", n)
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(n), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(n)*2<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(int64(10*n), resource.DecimalSI),
		}
		alloc := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(n)*1000-100, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(n)*2<<30-10<<20, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(int64(10*n), resource.DecimalSI),
		}
		it := &cloudprovider.InstanceType{Name: name, Capacity: capacity, Allocatable: alloc, Labels: map[string]string{
			corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
		}}
		for _, z := range []string{"test-zone-1", "test-zone-2"} {
			it.Offerings = append(it.Offerings,
				cloudprovider.Offering{Zone: z, CapacityType: v1.CapacityTypeSpot, Price: price, Available: true},
				cloudprovider.Offering{Zone: z, CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true})
		}
		it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: "test-zone-3", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true})
		out = append(out, it)
	}
	return out
}

// diversePods is the benchmark's workload made checkable: Karpenter's five
// groups, but every spread and affinity selector matches the pod's own
// label and the generic pods carry none, so that TestPlansHonourConstraints
// can check every constraint on the final plan. karpenterPods is the
// workload as Karpenter's benchmark builds it.
func diversePods(count int) []*corev1.Pod {
	r := rand.New(rand.NewSource(42))
	cpus := []string{"100m", "250m", "500m", "1", "1500m"}
	mems := []string{"100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"}
	letters := []string{"a", "b", "c", "d", "e", "f", "g"}
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pods := make([]*corev1.Pod, 0, count)
	for i := 0; i < count; i++ {
		p := mkPod(fmt.Sprintf("pod-%d", i), cpus[r.Intn(len(cpus))], mems[r.Intn(len(mems))])
		p.CreationTimestamp = created
		letter := letters[r.Intn(len(letters))]
		switch i % 5 {
		case 0:
		case 1:
			p.Labels["my-label"] = letter
			spread(corev1.LabelTopologyZone, 1, map[string]string{"my-label": letter})(p)
		case 2:
			p.Labels["my-label"] = letter
			spread(corev1.LabelHostname, 1, map[string]string{"my-label": letter})(p)
		case 3:
			p.Labels["my-affinity"] = letter
			podAffinity(corev1.LabelTopologyZone, map[string]string{"my-affinity": letter})(p)
		case 4:
			p.Labels["app"] = "nginx"
			podAntiAffinity(corev1.LabelHostname, map[string]string{"app": "nginx"})(p)
		}
		pods = append(pods, p)
	}
	return pods
}

// karpenterPods builds the workload of Karpenter's scheduling benchmark
// (BenchmarkScheduling1000 and 5000 in sigs.k8s.io/karpenter's
// pkg/controllers/provisioning/scheduling, as of v1.14): five equal groups
// in turn, the remainder generic, requests drawn uniformly from its sets:
//   - generic pods, each labelled my-label=<random letter>;
//   - zone spread (maxSkew 1) and hostname spread, each pod labelled
//     my-label=<letter> and its selector my-label=<another draw>, so a
//     spread counts generic pods and pods of other groups too;
//   - zone pod affinity, each pod labelled my-affinity=<letter> and
//     requiring a pod with my-affinity=<another draw> in its zone;
//   - hostname anti-affinity among all app=nginx pods.
//
// The draws come from one seeded source in Karpenter's order, so the
// workload is the same shape, not the same pods.
func karpenterPods(count int) []*corev1.Pod {
	r := rand.New(rand.NewSource(42))
	cpus := []string{"100m", "250m", "500m", "1", "1500m"}
	mems := []string{"100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"}
	letters := []string{"a", "b", "c", "d", "e", "f", "g"}
	letter := func() string { return letters[r.Intn(len(letters))] }
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var pods []*corev1.Pod
	add := func(n int, build func(p *corev1.Pod)) {
		for i := 0; i < n; i++ {
			p := mkPod(fmt.Sprintf("pod-%d", len(pods)), "1", "1Gi")
			p.CreationTimestamp = created
			build(p)
			// Requests are drawn last, after the labels, as Karpenter does.
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpus[r.Intn(len(cpus))]), corev1.ResourceMemory: resource.MustParse(mems[r.Intn(len(mems))])}
			pods = append(pods, p)
		}
	}
	generic := func(p *corev1.Pod) { p.Labels["my-label"] = letter() }
	spreadOn := func(key string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels["my-label"] = letter()
			spread(key, 1, map[string]string{"my-label": letter()})(p)
		}
	}
	group := count / 5
	add(group, generic)
	add(group, spreadOn(corev1.LabelTopologyZone))
	add(group, spreadOn(corev1.LabelHostname))
	add(group, func(p *corev1.Pod) {
		p.Labels["my-affinity"] = letter()
		podAffinity(corev1.LabelTopologyZone, map[string]string{"my-affinity": letter()})(p)
	})
	add(group, func(p *corev1.Pod) {
		p.Labels["app"] = "nginx"
		podAntiAffinity(corev1.LabelHostname, map[string]string{"app": "nginx"})(p)
	})
	add(count-len(pods), generic)
	return pods
}

func BenchmarkDiversePods(b *testing.B) {
	types := benchInstanceTypes()
	for _, count := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("pods=%d", count), func(b *testing.B) {
			snap := Snapshot{Pods: karpenterPods(count), NodePools: []NodePool{{NodePool: mkNodePool("default"), InstanceTypes: types}}}
			var plan *Plan
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				plan = Solve(snap, Options{})
			}
			b.StopTimer()
			if len(plan.Unschedulable) > 0 {
				b.Fatalf("%d pods unschedulable, e.g. %s: %s", len(plan.Unschedulable), plan.Unschedulable[0].Pod.Name, plan.Unschedulable[0].Reason)
			}
			b.ReportMetric(float64(count)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			b.ReportMetric(float64(len(plan.NewNodeClaims)), "nodes")
			b.ReportMetric(plan.TotalPrice(), "$/h")
			bound, err := LowerBound(snap)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(plan.TotalPrice()/bound, "lp-ratio")
		})
	}
}
