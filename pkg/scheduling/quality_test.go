package scheduling

import (
	"fmt"
	"math"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/lpbound"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// TestPlansNearTheIntegerBound holds batches of pods without constraints to
// within 1% (2% for two) of the configuration LP's certified bound, which no integer plan
// can beat (PackingModel, lpbound.Patterns). The shapes do not divide node
// sizes evenly and a few need large nodes, where rounding one node at a
// time leaves capacity idle on every node.
func TestPlansNearTheIntegerBound(t *testing.T) {
	od := onDemandPool("default")
	cases := []struct {
		name     string
		shapes   [][2]string
		pods     int
		maxRatio float64
		opts     []podOpt
		spread   bool // each app is zone-spread: check the skew
	}{
		{"four uneven shapes", [][2]string{{"2", "3Gi"}, {"700m", "5Gi"}, {"1300m", "1331Mi"}, {"3", "12Gi"}}, 5000, 1.01, nil, false},
		// The bound sits below the integer optimum by a margin not known
		// here; this batch is held to what the plan reaches today (1.7%).
		{"six uneven shapes", [][2]string{{"300m", "700Mi"}, {"1200m", "2560Mi"}, {"2700m", "5Gi"}, {"750m", "7Gi"}, {"6", "10Gi"}, {"100m", "200Mi"}}, 2000, 1.02, nil, false},
		{"huge and small", [][2]string{{"28", "100Gi"}, {"60", "200Gi"}, {"2", "4Gi"}, {"250m", "512Mi"}}, 400, 1.01, nil, false},
		// Pinned to one zone by a nodeSelector: rounded like any other.
		{"four uneven shapes in one zone", [][2]string{{"2", "3Gi"}, {"700m", "5Gi"}, {"1300m", "1331Mi"}, {"3", "12Gi"}}, 2000, 1.01, []podOpt{withNodeSelector(corev1.LabelTopologyZone, "us-east-1a")}, false},
		// Each shape spread over the three zones (maxSkew 1): rounded per
		// zone, where the greedy pass alone came to 13% over the bound.
		{"four shapes, each zone-spread", fourShapes, 2000, 1.03, []podOpt{withSpreadOnApp(corev1.LabelTopologyZone)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap := Snapshot{Pods: shapesOf(c.pods, c.shapes, c.opts...), NodePools: []NodePool{{NodePool: od, InstanceTypes: testCatalog(t)}}}
			plan := Solve(snap, Options{})
			if len(plan.Unschedulable) > 0 {
				t.Fatalf("%d unschedulable", len(plan.Unschedulable))
			}
			// Every app's pods are spread over the zones within one.
			perZone := map[string]map[string]int{}
			for _, nc := range plan.NewNodeClaims {
				if !c.spread {
					break
				}
				zones := nc.Requirements[corev1.LabelTopologyZone].Values()
				if len(zones) != 1 {
					t.Fatalf("NodeClaim %s may launch in zones %v", nc.InstanceType.Name, zones)
				}
				for _, p := range nc.Pods {
					if perZone[p.Labels["app"]] == nil {
						perZone[p.Labels["app"]] = map[string]int{}
					}
					perZone[p.Labels["app"]][zones[0]]++
				}
			}
			for app, counts := range perZone {
				lo, hi := math.MaxInt, 0
				for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
					lo, hi = min(lo, counts[z]), max(hi, counts[z])
				}
				if hi-lo > 1 {
					t.Errorf("%s is spread %v over the zones, skew %d", app, counts, hi-lo)
				}
			}
			m := PackingModel(snap)
			res, err := lpbound.Patterns(m.Kinds, m.Shapes, m.Limits, lpbound.PatternOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Bound <= 0 {
				t.Fatalf("no bound: %+v", res.Uncovered)
			}
			if ratio := plan.TotalPrice() / res.Bound; ratio > c.maxRatio {
				t.Errorf("plan $%.2f/h is %.4f× the integer bound $%.2f/h", plan.TotalPrice(), ratio, res.Bound)
			} else {
				t.Logf("plan $%.2f/h is %.4f× the integer bound $%.2f/h", plan.TotalPrice(), ratio, res.Bound)
			}
		})
	}
}

// TestLimitedPoolSpentWhereItSavesMost plans a pool limited in CPUs over an
// unlimited one. Which pods overflow is the plan's choice; the limited
// capacity should go to the pods it saves most on.
//   - A spot pool limited to 1,500 CPUs over an on-demand one: opening
//     patterns in the order pattern generation found them cost 8.2% over
//     the bound, in the order of their savings 5.7%; held to 7%.
//   - A c pool limited to 400 CPUs over a c/m/r one, three of five apps
//     zone-spread: with the other apps kept off the zones' nodes the plan
//     came to 9.0% over the bound, planned again with them let in 5.7%
//     (2.6% over the best integer plan CBC found, make optimum); held to
//     7%.
func TestLimitedPoolSpentWhereItSavesMost(t *testing.T) {
	pool := func(name string, weight int32, ct string, categories ...string) *v1.NodePool {
		np := mkNodePool(name, req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
			req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, ct),
			req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, categories...),
			req("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "2"))
		np.Spec.Weight = &weight
		return np
	}
	limited := func(np *v1.NodePool, cpus string) *v1.NodePool {
		np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse(cpus)}
		return np
	}
	type app struct {
		n        int
		cpu, mem string
		spread   bool
	}
	cases := []struct {
		name     string
		pools    []*v1.NodePool
		apps     []app
		maxRatio float64
	}{
		{"spot over on-demand", []*v1.NodePool{limited(pool("spot", 20, "spot", "c", "m", "r"), "1500"), pool("on-demand", 10, "on-demand", "c", "m", "r")},
			[]app{{600, "500m", "1Gi", false}, {500, "1", "4Gi", false}, {500, "2", "2Gi", false}, {400, "750m", "1536Mi", false}, {300, "3", "6Gi", false}, {200, "200m", "3Gi", false}}, 1.07},
		{"zone-spread apps over a limited pool", []*v1.NodePool{limited(pool("compute", 20, "on-demand", "c"), "400"), pool("default", 10, "on-demand", "c", "m", "r")},
			[]app{{400, "1", "1Gi", true}, {300, "1500m", "4Gi", true}, {200, "2", "8Gi", true}, {400, "250m", "512Mi", false}, {200, "3", "3Gi", false}}, 1.07},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap := Snapshot{DaemonSets: []*corev1.Pod{mkPod("aws-node", "25m", "64Mi"), mkPod("kube-proxy", "100m", "128Mi"), mkPod("ebs-csi-node", "30m", "120Mi")}}
			for _, np := range c.pools {
				snap.NodePools = append(snap.NodePools, NodePool{NodePool: np, InstanceTypes: testCatalog(t)})
			}
			for _, a := range c.apps {
				name := fmt.Sprintf("app-%s-%s", a.cpu, a.mem)
				opts := []podOpt{withLabels("app", name)}
				if a.spread {
					opts = append(opts, withSpreadOnApp(corev1.LabelTopologyZone))
				}
				snap.Pods = append(snap.Pods, replicas(a.n, name, a.cpu, a.mem, opts...)...)
			}
			plan := Solve(snap, Options{})
			if len(plan.Unschedulable) > 0 {
				t.Fatalf("%d unschedulable", len(plan.Unschedulable))
			}
			m := PackingModel(snap)
			res, err := lpbound.Patterns(m.Kinds, m.Shapes, m.Limits, lpbound.PatternOptions{})
			if err != nil || res.Bound <= 0 {
				t.Fatalf("no bound: %v", err)
			}
			ratio := plan.TotalPrice() / res.Bound
			t.Logf("plan $%.2f/h is %.4f× the integer bound $%.2f/h", plan.TotalPrice(), ratio, res.Bound)
			if ratio > c.maxRatio {
				t.Errorf("plan $%.2f/h is %.4f× the integer bound, want at most %.2f×", plan.TotalPrice(), ratio, c.maxRatio)
			}
		})
	}
}
