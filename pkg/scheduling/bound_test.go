package scheduling

import (
	"fmt"
	"math"
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/lpbound/lpcheck"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// boundTypes are a small catalog: three families (one with a local SSD that
// a DaemonSet selects, one arm64) in four sizes, each in two zones.
func boundTypes() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for _, fam := range []struct {
		name, arch string
		ssd        bool
		rate, mem  float64
	}{{"gp", "amd64", false, 0.05, 4}, {"ssd", "amd64", true, 0.055, 8}, {"arm", "arm64", false, 0.04, 4}} {
		for _, size := range []int64{2, 4, 8, 16} {
			name := fmt.Sprintf("%s.%d", fam.name, size)
			labels := map[string]string{corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: fam.arch, corev1.LabelOSStable: "linux", "example.com/family": fam.name}
			if fam.ssd {
				labels[localSSD] = "true"
			}
			capacity := corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(size, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(float64(size)*fam.mem)<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(8*size, resource.DecimalSI),
			}
			alloc := capacity.DeepCopy()
			alloc[corev1.ResourceCPU] = *resource.NewMilliQuantity(size*1000-80, resource.DecimalSI)
			it := &cloudprovider.InstanceType{Name: name, Labels: labels, Capacity: capacity, Allocatable: alloc}
			for i, z := range []string{"zone-1", "zone-2"} {
				price := fam.rate * float64(size) * (1 + 0.03*float64(i))
				it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: z, CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true})
			}
			out = append(out, it)
		}
	}
	return out
}

// TestLowerBoundIndependently recomputes the LP lower bound without the
// solver's code: which (NodePool, type) kinds exist, their price, the room
// DaemonSets leave on each (kube-scheduler's node-affinity and taint
// matchers on a synthetic node), which pods may use each; then solves the
// LP with gonum's simplex on its literal formulation, and compares with
// LowerBound. The DaemonSets are the cases the overhead once got wrong: a
// nodeSelector on a label only the instance type sets, one on a label only
// some types set, a startup taint (which does not keep DaemonSets off) and
// a spec.taint (which does).
func TestLowerBoundIndependently(t *testing.T) {
	general := mkNodePool("general", req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	general.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule}}
	dedicated := mkNodePool("dedicated")
	dedicated.Spec.Template.Labels = map[string]string{"team": "batch"}
	dedicated.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "team", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	tolerateBatch := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	}
	daemonSets := []*corev1.Pod{
		mkPod("kube-proxy", "150m", "200Mi", withNodeSelector(corev1.LabelOSStable, "linux"), func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}),
		mkPod("ssd-agent", "700m", "1Gi", withNodeSelector(localSSD, "true")),
		mkPod("arm-agent", "300m", "256Mi", withNodeSelector(corev1.LabelArchStable, "arm64")),
		mkPod("batch-agent", "500m", "512Mi", withNodeSelector("team", "batch"), tolerateBatch),
	}
	pods := append(append(append(append(
		replicas(40, "web", "700m", "1Gi"),
		replicas(25, "cache", "1500m", "6Gi", withNodeSelector(localSSD, "true"))...),
		replicas(30, "job", "2", "3Gi", withNodeSelector("team", "batch"), tolerateBatch)...),
		replicas(20, "tiny", "100m", "64Mi")...),
		replicas(12, "arm", "1", "1Gi", withNodeSelector(corev1.LabelArchStable, "arm64"), tolerateBatch)...)
	types := boundTypes()
	pools := []*v1.NodePool{general, dedicated}
	snap := Snapshot{Pods: pods, DaemonSets: daemonSets}
	for _, np := range pools {
		snap.NodePools = append(snap.NodePools, NodePool{NodePool: np, InstanceTypes: types})
	}

	got, err := LowerBound(snap)
	if err != nil {
		t.Fatal(err)
	}
	want, err := independentBound(pools, types, daemonSets, pods)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want) > 1e-6*math.Max(1, want) {
		t.Fatalf("LowerBound $%.6f/h, independent LP $%.6f/h", got, want)
	}
	t.Logf("bound $%.4f/h", got)
}

// independentBound is the LP of LowerBound's comment, built from scratch
// and solved literally (lpcheck): kinds are a pool and a type it may
// launch, priced at the type's cheapest offering, with the room its
// DaemonSets leave; a shape may use the kinds whose node it would run on.
func independentBound(pools []*v1.NodePool, types []*cloudprovider.InstanceType, daemons, pods []*corev1.Pod) (float64, error) {
	resources := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods}
	// amount is in cores, GiB and pods: similar magnitudes keep the
	// simplex's pivots sound.
	amount := func(name corev1.ResourceName, q resource.Quantity) float64 {
		if name == corev1.ResourceMemory {
			return float64(q.Value()) / (1 << 30)
		}
		return float64(q.MilliValue()) / 1000
	}
	var kinds []lpcheck.Kind
	var nodes []*corev1.Node
	for _, np := range pools {
		for _, it := range types {
			node := syntheticNode(np, it, nil)
			if !nodeMatchesPool(np, node) {
				continue
			}
			price := math.Inf(1)
			for _, o := range it.Offerings {
				if o.Available {
					price = math.Min(price, o.Price)
				}
			}
			used := podsRequest(daemonsOn(daemons, node))
			free := make([]float64, len(resources))
			for r, name := range resources {
				free[r] = amount(name, it.Allocatable[name]) - amount(name, used[name])
			}
			kinds = append(kinds, lpcheck.Kind{Price: price, Capacity: free})
			nodes = append(nodes, node)
		}
	}
	// Replicas (named prefix-i) are one shape.
	var shapes []lpcheck.Shape
	index := map[string]int{}
	for _, p := range pods {
		prefix := p.Name[:strings.LastIndex(p.Name, "-")]
		if i, ok := index[prefix]; ok {
			shapes[i].Count++
			continue
		}
		index[prefix] = len(shapes)
		req := podsRequest([]*corev1.Pod{p})
		sh := lpcheck.Shape{Count: 1, Request: make([]float64, len(resources))}
		for r, name := range resources {
			sh.Request[r] = amount(name, req[name])
		}
		for k, node := range nodes {
			if podRunsOn(p, node) {
				sh.Kinds = append(sh.Kinds, k)
			}
		}
		shapes = append(shapes, sh)
	}
	return lpcheck.Solve(kinds, shapes)
}

// nodeMatchesPool reports whether a node of the type satisfies the pool's
// requirements, read as a required node affinity.
func nodeMatchesPool(np *v1.NodePool, node *corev1.Node) bool {
	var exprs []corev1.NodeSelectorRequirement
	for _, r := range np.Spec.Template.Spec.Requirements {
		exprs = append(exprs, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}
	if len(exprs) > 0 {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}}
	}
	return podRunsOn(p, node)
}
