package scheduling

import (
	"fmt"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

type workload struct {
	name  string
	pools []*v1.NodePool
	pods  func() []*corev1.Pod
}

func shapesOf(total int, shapes [][2]string, opts ...podOpt) []*corev1.Pod {
	var pods []*corev1.Pod
	for i, s := range shapes {
		n := total / len(shapes)
		if i < total%len(shapes) {
			n++
		}
		app := fmt.Sprintf("app-%d", i)
		pods = append(pods, replicas(n, app, s[0], s[1], append([]podOpt{withLabels("app", app)}, opts...)...)...)
	}
	return pods
}

func withSpreadOnApp(key string) podOpt {
	return func(p *corev1.Pod) { spread(key, 1, map[string]string{"app": p.Labels["app"]})(p) }
}

func withAntiAffinityOnApp() podOpt {
	return func(p *corev1.Pod) {
		podAntiAffinity(corev1.LabelHostname, map[string]string{"app": p.Labels["app"]})(p)
	}
}

var fourShapes = [][2]string{{"2", "1Gi"}, {"500m", "4Gi"}, {"1", "2Gi"}, {"250m", "256Mi"}}
var eightShapes = [][2]string{{"2", "1Gi"}, {"500m", "4Gi"}, {"1", "2Gi"}, {"250m", "256Mi"}, {"4", "8Gi"}, {"100m", "128Mi"}, {"1500m", "6Gi"}, {"3", "2Gi"}}

func qualityWorkloads() []workload {
	od := onDemandPool("default")
	anyPool := mkNodePool("any", req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	return []workload{
		{"mixed-1000-on-demand", []*v1.NodePool{od}, func() []*corev1.Pod { return shapesOf(1000, fourShapes) }},
		{"mixed-5000-on-demand", []*v1.NodePool{od}, func() []*corev1.Pod { return shapesOf(5000, fourShapes) }},
		{"mixed-3000-spot-and-on-demand", []*v1.NodePool{anyPool}, func() []*corev1.Pod { return shapesOf(3000, eightShapes) }},
		{"zone-spread-2000", []*v1.NodePool{od}, func() []*corev1.Pod { return shapesOf(2000, fourShapes, withSpreadOnApp(corev1.LabelTopologyZone)) }},
		{"anti-affinity-300", []*v1.NodePool{od}, func() []*corev1.Pod {
			return append(shapesOf(100, [][2]string{{"500m", "1Gi"}}, withAntiAffinityOnApp()), replicas(200, "free", "1", "2Gi", withLabels("app", "free"))...)
		}},
	}
}

// BenchmarkCostVsLPBound reports each workload's plan $/h against the LP
// lower bound on the embedded catalog:
//
//	go test -run '^$' -bench CostVsLPBound -benchtime 1x ./pkg/scheduling/
func BenchmarkCostVsLPBound(b *testing.B) {
	for _, w := range qualityWorkloads() {
		b.Run(w.name, func(b *testing.B) {
			snap := Snapshot{Pods: w.pods()}
			for _, np := range w.pools {
				snap.NodePools = append(snap.NodePools, NodePool{NodePool: np, InstanceTypes: testCatalog(b)})
			}
			var plan *Plan
			for i := 0; i < b.N; i++ {
				plan = Solve(snap, Options{})
			}
			b.StopTimer()
			if len(plan.Unschedulable) > 0 {
				b.Fatalf("%d unschedulable: %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
			}
			bound, err := LowerBound(snap)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(plan.TotalPrice(), "$/h")
			b.ReportMetric(bound, "lp$/h")
			b.ReportMetric(plan.TotalPrice()/bound, "ratio")
			b.ReportMetric(float64(len(plan.NewNodeClaims)), "nodes")
		})
	}
}
