package disruption

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The decision benchmarks run on a cluster shaped like a production one
// rather than one uniform pool, because what makes a decision slow or
// wrong is exactly what a uniform pool leaves out: several pools (an
// on-demand one and a spot one), three zones, DaemonSets on every node
// (one of them selecting kubernetes.io/os, as aws-node, kube-proxy and
// ebs-csi-node do), and zone-spread workloads whose pods may only move
// where the spread allows. The budget is Karpenter's default, nodes: 10%
// per pool.

var benchZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// benchDaemonSets are three DaemonSets like EKS's: their templates (what a
// new node will run) and the pods already bound on each node.
func benchDaemonSets() []*corev1.Pod {
	ds := func(name, cpu, mem string, selector map[string]string) *corev1.Pod {
		p := pod(name, cpu, mem)
		p.Namespace = "kube-system"
		p.Labels = map[string]string{"app": name}
		p.Spec.NodeSelector = selector
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		return p
	}
	return []*corev1.Pod{
		ds("aws-node", "25m", "64Mi", nil),
		ds("kube-proxy", "100m", "64Mi", nil),
		ds("ebs-csi-node", "30m", "120Mi", map[string]string{corev1.LabelOSStable: "linux"}),
	}
}

// benchPools are the cluster's pools: on-demand c/m/r and spot c/m/r.
func benchPools() []*v1.NodePool {
	general := nodePool("general", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	spot := nodePool("spot", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot"),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	return []*v1.NodePool{general, spot}
}

// productionCluster builds count nodes (70% on-demand, 30% spot, zones in
// turn) of 4-8 vCPU types, each with the three DaemonSets' pods, packed
// with pods of four shapes of which one in five belongs to one of ten
// zone-spread Deployments, then removes half the workload pods at random
// (fixed seed), and returns the budget: 10% of each pool's nodes.
func productionCluster(count int) (scheduling.Snapshot, []Candidate, map[string]int) {
	catalogTypes()
	r := rand.New(rand.NewSource(7))
	sizes := []string{"c6a.xlarge", "m6a.xlarge", "c6a.2xlarge", "m6a.2xlarge", "r6a.xlarge"}
	shapes := [][2]string{{"250m", "512Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}, {"100m", "256Mi"}}
	daemons := benchDaemonSets()
	pools := benchPools()
	perPool := map[string]int{}
	s := &setup{}
	for i := 0; i < count; i++ {
		pool, ct := pools[0], v1.CapacityTypeOnDemand
		if i%10 >= 7 {
			pool, ct = pools[1], v1.CapacityTypeSpot
		}
		zone := benchZones[i%len(benchZones)]
		typ := sizes[r.Intn(len(sizes))]
		name := fmt.Sprintf("node-%04d", i)
		free := resources.FromResourceList(types[typ].Allocatable)
		var onNode []*corev1.Pod
		for _, d := range daemons {
			p := d.DeepCopy()
			p.Name = d.Name + "-" + name
			ctrl := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: d.Name, Controller: &ctrl}}
			free = free.Sub(resources.PodRequests(p))
			onNode = append(onNode, p)
		}
		for j := 0; ; j++ {
			sh := shapes[r.Intn(len(shapes))]
			p := pod(fmt.Sprintf("%s-p%d", name, j), sh[0], sh[1])
			if j%5 == 0 {
				// Nodes take zones in turn, so each spread Deployment stays
				// balanced across zones as the cluster fills.
				app := fmt.Sprintf("web-%d", (i/len(benchZones))%10)
				p.Labels = map[string]string{"app": app}
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
			}
			req := resources.PodRequests(p)
			if !req.Fits(free) {
				break
			}
			free = free.Sub(req)
			if r.Intn(2) == 0 { // the scale-down
				onNode = append(onNode, p)
			}
		}
		n, c := node(name, typ, ct, onNode...)
		n.Labels[corev1.LabelTopologyZone] = zone
		n.Labels[v1.LabelNodePool] = pool.Name
		n.NodePool, c.NodePool = pool.Name, pool.Name
		c.Price = math.Inf(1)
		for _, o := range types[typ].Offerings {
			if o.Zone == zone && o.CapacityType == ct {
				c.Price = o.Price
			}
		}
		s.add(n, c)
		perPool[pool.Name]++
	}
	snap := scheduling.Snapshot{Nodes: s.nodes, DaemonSets: daemons}
	budget := map[string]int{}
	for _, p := range pools {
		snap.NodePools = append(snap.NodePools, scheduling.NodePool{NodePool: p, InstanceTypes: catalogTypes(),
			InUse: corev1.ResourceList{"nodes": *resource.NewQuantity(int64(perPool[p.Name]), resource.DecimalSI)}})
		budget[p.Name] = int(math.Ceil(float64(perPool[p.Name]) / 10))
	}
	return snap, s.cands, budget
}

// BenchmarkConsolidationDecision times one decision over every candidate
// of the production-shaped cluster, under the default 10% budget:
//
//	go test -run '^$' -bench ConsolidationDecision -benchtime 1x ./pkg/disruption/
func BenchmarkConsolidationDecision(b *testing.B) {
	for _, count := range []int{1000, 2000} {
		b.Run(fmt.Sprintf("nodes=%d", count), func(b *testing.B) {
			snap, cands, budget := productionCluster(count)
			var d Decision
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d = Consolidate(snap, append([]Candidate{}, cands...), Options{Allowed: budget, AllowedEmpty: budget})
			}
			b.StopTimer()
			// The controller carries out the first command of a decision
			// and decides again; the others are what it found besides.
			removed, savings := 0, 0.0
			if len(d.Commands) > 0 {
				removed, savings = len(d.Commands[0].Candidates), d.Commands[0].Savings
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/decision")
			b.ReportMetric(float64(len(cands)), "candidates")
			b.ReportMetric(float64(len(d.Commands)), "commands")
			b.ReportMetric(float64(removed), "nodes-removed")
			b.ReportMetric(savings, "saved-$/h")
		})
	}
}

// BenchmarkRepack times the repack search alone, the last resort of a
// decision, over every candidate of the production-shaped cluster under
// the default 10% budget:
//
//	go test -run '^$' -bench Repack -benchtime 1x ./pkg/disruption/
func BenchmarkRepack(b *testing.B) {
	for _, count := range []int{1000, 2000} {
		b.Run(fmt.Sprintf("nodes=%d", count), func(b *testing.B) {
			snap, cands, budget := productionCluster(count)
			var cmd Command
			var ok bool
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cmd, ok = repack(snap, newKubeModel(snap), cands, budget, Options{}, totalsByPool(snap, cands))
			}
			b.StopTimer()
			if !ok {
				b.Fatal("no repack found")
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/search")
			b.ReportMetric(float64(len(cmd.Candidates)), "nodes-replaced")
			b.ReportMetric(float64(len(cmd.Replacements)), "new-nodes")
			b.ReportMetric(cmd.Savings, "saved-$/h")
		})
	}
}

// TestProductionClusterIsConsistent guards the benchmark's cluster: every
// node within its allocatable, DaemonSet pods everywhere, both pools and
// all zones present, and a decision that removes something.
func TestProductionClusterIsConsistent(t *testing.T) {
	snap, cands, budget := productionCluster(60)
	zones, pools := map[string]bool{}, map[string]bool{}
	for _, n := range snap.Nodes {
		used, daemonPods := resources.Resources{}, 0
		for _, p := range n.Pods {
			used = used.Add(resources.PodRequests(p))
			if p.Namespace == "kube-system" {
				daemonPods++
			}
		}
		if !used.Fits(resources.FromResourceList(n.Allocatable)) || daemonPods != 3 {
			t.Fatalf("%s: requests %s over allocatable, or %d DaemonSet pods", n.Name, used, daemonPods)
		}
		zones[n.Labels[corev1.LabelTopologyZone]], pools[n.NodePool] = true, true
	}
	if len(zones) != 3 || len(pools) != 2 || budget["general"] != 5 || budget["spot"] != 2 {
		t.Fatalf("zones %v pools %v budget %v", zones, pools, budget)
	}
	d := Consolidate(snap, cands, Options{Allowed: budget, AllowedEmpty: budget})
	removed := 0
	if len(d.Commands) > 0 {
		removed = len(d.Commands[0].Candidates)
	}
	if removed == 0 || removed > 7 {
		t.Fatalf("removed %d nodes (budget %v): %v", removed, budget, summary(d))
	}
}
