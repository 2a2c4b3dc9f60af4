package disruption

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	once  sync.Once
	types map[string]*cloudprovider.InstanceType
	all   []*cloudprovider.InstanceType
)

func catalogTypes() []*cloudprovider.InstanceType {
	once.Do(func() {
		var err error
		all, err = catalog.InstanceTypes(catalog.Options{})
		if err != nil {
			panic(err)
		}
		types = map[string]*cloudprovider.InstanceType{}
		for _, it := range all {
			types[it.Name] = it
		}
	})
	return all
}

func nodePool(name string, reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodePool {
	return &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		Requirements: reqs, NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
	}}}}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// guide03 is the guides' on-demand c/m/r pool.
func guide03() *v1.NodePool {
	return nodePool("default", req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"),
		req("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "2"))
}

func pod(name, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
}

// node is a running node of a catalog type with pods, and its candidate.
func node(name, typ, capacityType string, pods ...*corev1.Pod) (*scheduling.Node, Candidate) {
	catalogTypes()
	it := types[typ]
	labels := map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: "us-east-1a", v1.LabelCapacityType: capacityType, v1.LabelNodePool: "default"}
	for k, v := range it.Labels {
		labels[k] = v
	}
	price := 0.0
	for _, o := range it.Offerings {
		if o.Zone == "us-east-1a" && o.CapacityType == capacityType {
			price = o.Price
		}
	}
	for _, p := range pods {
		p.Spec.NodeName = name
	}
	return &scheduling.Node{Name: name, Labels: labels, Allocatable: it.Allocatable, Pods: pods, NodePool: "default"},
		Candidate{Node: name, NodeClaim: name, NodePool: "default", InstanceType: typ, CapacityType: capacityType, Price: price}
}

type setup struct {
	nodes []*scheduling.Node
	cands []Candidate
}

func (s *setup) add(n *scheduling.Node, c Candidate) *setup {
	s.nodes = append(s.nodes, n)
	s.cands = append(s.cands, c)
	return s
}

func TestConsolidate(t *testing.T) {
	cases := []struct {
		name  string
		pool  *v1.NodePool
		setup func() *setup
		opts  Options
		check func(t *testing.T, d Decision)
	}{
		{name: "guide 03 scale-down: replace the 2xlarge with a cheaper node", pool: guide03(),
			setup: func() *setup {
				return (&setup{}).add(node("big", "c6a.2xlarge", "on-demand", pod("inflate-0", "1", "1.5Gi")))
			},
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 1 || len(d.Commands[0].Replacements) != 1 {
					t.Fatalf("want one replace, got %+v skipped %v", d.Commands, d.Skipped)
				}
				r := d.Commands[0].Replacements[0]
				if r.Price() >= 0.306 || !strings.HasSuffix(r.InstanceType.Name, ".large") {
					t.Fatalf("replacement %s at $%.4f", r.InstanceType.Name, r.Price())
				}
			}},
		{name: "a replacement launches only as types cheaper than the node, at their worst price", pool: guide03(),
			setup: func() *setup {
				return (&setup{}).add(node("m", "m6a.large", "on-demand", pod("p", "1", "1Gi")))
			},
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 1 || len(d.Commands[0].Replacements) != 1 {
					t.Fatalf("want one replace, got %v skipped %v", summary(d), d.Skipped)
				}
				r := d.Commands[0].Replacements[0]
				const nodePrice = 0.0864 // m6a.large on-demand
				allowed := offeringFilter(r.Requirements)
				for _, it := range r.InstanceTypes {
					if worst, _ := worstPrice(it, allowed); worst >= nodePrice {
						t.Errorf("option %s can cost $%.4f/h, not less than the node's $%.4f/h", it.Name, worst, nodePrice)
					}
					if !r.Requirements[corev1.LabelInstanceTypeStable].Has(it.Name) {
						t.Errorf("option %s is not in the instance-type requirement %s", it.Name, r.Requirements[corev1.LabelInstanceTypeStable])
					}
				}
				if r.Requirements[corev1.LabelInstanceTypeStable].Has("m6a.large") {
					t.Errorf("the node's own type is a launch option: %s", r.Requirements[corev1.LabelInstanceTypeStable])
				}
			}},
		{name: "an empty node is deleted", pool: guide03(),
			setup: func() *setup { return (&setup{}).add(node("idle", "c6a.large", "on-demand")) },
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 1 || d.Commands[0].Reason != v1.DisruptionReasonEmpty || len(d.Commands[0].Replacements) != 0 {
					t.Fatalf("%+v", d.Commands)
				}
			}},
		{name: "a node whose pods fit elsewhere is deleted", pool: guide03(),
			setup: func() *setup {
				s := &setup{}
				s.add(node("a", "c6a.2xlarge", "on-demand", pod("a1", "1", "1Gi"), pod("a2", "1", "1Gi")))
				return s.add(node("b", "c6a.2xlarge", "on-demand", pod("b1", "1", "1Gi")))
			},
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 1 || len(d.Commands[0].Candidates) != 1 || len(d.Commands[0].Replacements) != 0 {
					t.Fatalf("%+v skipped %v", d.Commands, d.Skipped)
				}
			}},
		{name: "a blocked node is left alone and says why", pool: guide03(),
			setup: func() *setup {
				n, c := node("kept", "c6a.2xlarge", "on-demand", pod("p", "1", "1Gi"))
				c.Blocked = `pod default/p has "karpenter.sh/do-not-disrupt": "true"`
				return (&setup{}).add(n, c)
			},
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 0 || !strings.Contains(d.Skipped["kept"], "do-not-disrupt") {
					t.Fatalf("%+v %v", d.Commands, d.Skipped)
				}
			}},
		{name: "a zero budget blocks", pool: guide03(), opts: Options{Allowed: map[string]int{"default": 0}},
			setup: func() *setup { return (&setup{}).add(node("idle", "c6a.large", "on-demand")) },
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 0 || !strings.Contains(d.Skipped["idle"], "disruption budget") {
					t.Fatalf("%+v %v", d.Commands, d.Skipped)
				}
			}},
		{name: "WhenEmpty leaves nodes with pods", pool: guide03(), opts: Options{Policy: map[string]v1.ConsolidationPolicy{"default": v1.ConsolidationPolicyWhenEmpty}},
			setup: func() *setup { return (&setup{}).add(node("big", "c6a.2xlarge", "on-demand", pod("p", "1", "1Gi"))) },
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 0 || !strings.Contains(d.Skipped["big"], "WhenEmpty") {
					t.Fatalf("%+v %v", d.Commands, d.Skipped)
				}
			}},
		{name: "no cheaper replacement for a right-sized node", pool: guide03(),
			setup: func() *setup { return (&setup{}).add(node("fit", "c6a.large", "on-demand", pod("p", "1", "1Gi"))) },
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 0 || !strings.Contains(d.Skipped["fit"], "no cheaper replacement") {
					t.Fatalf("%+v %v", d.Commands, d.Skipped)
				}
			}},
		{name: "spot to spot needs the gate", pool: nodePool("default", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")),
			setup: func() *setup { return (&setup{}).add(node("spot", "m5.4xlarge", "spot", pod("p", "1", "1Gi"))) },
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 0 || !strings.Contains(d.Skipped["spot"], "SpotToSpotConsolidation is disabled") {
					t.Fatalf("%+v %v", d.Commands, d.Skipped)
				}
			}},
		{name: "spot to spot with the gate", pool: nodePool("default", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")),
			opts:  Options{SpotToSpot: true},
			setup: func() *setup { return (&setup{}).add(node("spot", "m5.4xlarge", "spot", pod("p", "1", "1Gi"))) },
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 1 || len(d.Commands[0].Replacements) != 1 || d.Commands[0].Savings <= 0 {
					t.Fatalf("%+v %v", d.Commands, d.Skipped)
				}
				r := d.Commands[0].Replacements[0]
				if len(r.InstanceTypes) != SpotToSpotMinTypes || r.Requirements[v1.LabelCapacityType].Len() != 1 || !r.Requirements[v1.LabelCapacityType].Has("spot") {
					t.Fatalf("replacement options %d, capacity types %v; want %d spot options", len(r.InstanceTypes), r.Requirements[v1.LabelCapacityType], SpotToSpotMinTypes)
				}
			}},
		{name: "spot to spot needs 15 cheaper types", pool: nodePool("default", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot"), req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")),
			opts:  Options{SpotToSpot: true},
			setup: func() *setup { return (&setup{}).add(node("spot", "m5.4xlarge", "spot", pod("p", "1", "1Gi"))) },
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 0 || !strings.Contains(d.Skipped["spot"], "needs 15 instance types cheaper") {
					t.Fatalf("%v %v", summary(d), d.Skipped)
				}
			}},
		{name: "one big node becomes several cheaper ones", pool: guide03(),
			setup: func() *setup {
				var pods []*corev1.Pod
				for i, sh := range [][2]string{{"2", "1Gi"}, {"500m", "4Gi"}, {"1", "2Gi"}, {"250m", "256Mi"}} {
					for j := 0; j < 5; j++ {
						pods = append(pods, pod(fmt.Sprintf("p%d-%d", i, j), sh[0], sh[1]))
					}
				}
				// 18.75 CPUs: no single type cheaper than an 8xlarge fits them.
				return (&setup{}).add(node("huge", "c6a.8xlarge", "on-demand", pods...))
			},
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 1 || len(d.Commands[0].Candidates) != 1 || len(d.Commands[0].Replacements) < 2 || d.Commands[0].Savings < 0.1*d.Commands[0].Candidates[0].Price {
					t.Fatalf("%v skipped %v", summary(d), d.Skipped)
				}
			}},
		{name: "Balanced approves a replacement that saves much for few moves", pool: guide03(),
			opts: Options{Policy: map[string]v1.ConsolidationPolicy{"default": v1.ConsolidationPolicyBalanced}},
			setup: func() *setup {
				s := (&setup{}).add(node("big", "c6a.2xlarge", "on-demand", pod("p", "1", "1Gi")))
				return s.add(node("full", "c6a.large", "on-demand", pod("q", "1500m", "1Gi")))
			},
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 1 || d.Commands[0].Candidates[0].Node != "big" || len(d.Commands[0].Replacements) != 1 {
					t.Fatalf("%v skipped %v", summary(d), d.Skipped)
				}
			}},
		{name: "Balanced rejects a replacement that saves little for many moves", pool: guide03(),
			opts:  Options{Policy: map[string]v1.ConsolidationPolicy{"default": v1.ConsolidationPolicyBalanced}},
			setup: balancedSetup,
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 0 || !strings.Contains(d.Skipped["small"], "consolidationPolicy is Balanced") {
					t.Fatalf("%v skipped %v", summary(d), d.Skipped)
				}
			}},
		{name: "WhenEmptyOrUnderutilized takes that replacement", pool: guide03(), setup: balancedSetup,
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 1 || d.Commands[0].Candidates[0].Node != "small" {
					t.Fatalf("%v skipped %v", summary(d), d.Skipped)
				}
			}},
		{name: "pods that fit nowhere keep their node", pool: nodePool("default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "c6a.large")),
			setup: func() *setup { return (&setup{}).add(node("only", "c6a.2xlarge", "on-demand", pod("p", "4", "1Gi"))) },
			check: func(t *testing.T, d Decision) {
				if len(d.Commands) != 0 || !strings.Contains(d.Skipped["only"], "would not fit elsewhere") {
					t.Fatalf("%+v %v", d.Commands, d.Skipped)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.setup()
			snap := scheduling.Snapshot{Nodes: s.nodes, NodePools: []scheduling.NodePool{{NodePool: tc.pool, InstanceTypes: catalogTypes()}}}
			opts := tc.opts
			if opts.Allowed == nil {
				opts.Allowed = map[string]int{"default": 10}
			}
			tc.check(t, Consolidate(snap, s.cands, opts))
		})
	}
}

// balancedSetup is a pool where replacing one node saves 2% of the cost but
// moves 4 of its 14 pods.
func balancedSetup() *setup {
	s := (&setup{}).add(node("small", "c6a.2xlarge", "on-demand", pod("a", "500m", "1Gi"), pod("b", "500m", "1Gi"), pod("c", "500m", "1Gi"), pod("d", "500m", "1Gi")))
	for i := 0; i < 10; i++ {
		s.add(node(fmt.Sprintf("full-%d", i), "c6a.4xlarge", "on-demand", pod(fmt.Sprintf("f%d", i), "12", "1Gi")))
	}
	return s
}

// scaledDownCluster builds count nodes of 2-8 vCPU types, packed with pods
// of four shapes, then removes half the pods at random (fixed seed).
func scaledDownCluster(count int) (scheduling.Snapshot, []Candidate) {
	r := rand.New(rand.NewSource(7))
	sizes := []string{"c6a.xlarge", "m6a.xlarge", "c6a.2xlarge", "m6a.2xlarge", "r6a.xlarge"}
	shapes := [][2]string{{"250m", "512Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}, {"100m", "256Mi"}}
	s := &setup{}
	for i := 0; i < count; i++ {
		typ := sizes[r.Intn(len(sizes))]
		free := resources.FromResourceList(types2(typ).Allocatable)
		var pods []*corev1.Pod
		for j := 0; ; j++ {
			sh := shapes[r.Intn(len(shapes))]
			p := pod(fmt.Sprintf("n%d-p%d", i, j), sh[0], sh[1])
			req := resources.PodRequests(p)
			if !req.Fits(free) {
				break
			}
			free = free.Sub(req)
			if r.Intn(2) == 0 { // the scale-down
				pods = append(pods, p)
			}
		}
		s.add(node(fmt.Sprintf("node-%04d", i), typ, "on-demand", pods...))
	}
	pool := nodePool("default", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	return scheduling.Snapshot{Nodes: s.nodes, NodePools: []scheduling.NodePool{{NodePool: pool, InstanceTypes: catalogTypes()}}}, s.cands
}

func types2(name string) *cloudprovider.InstanceType {
	catalogTypes()
	return types[name]
}

// TestTrialsLeaveNoTrace checks the shared model's rollback: the same trial
// gives the same answer however many other trials ran in between, and a
// decision on a copy equals a decision on the original.
func TestTrialsLeaveNoTrace(t *testing.T) {
	snap, cands := scaledDownCluster(60)
	cluster := scheduling.NewCluster(snap, scheduling.Options{})
	describe := func(r scheduling.Removal) string {
		out := fmt.Sprintf("moved=%d unschedulable=%d", r.Moved, len(r.Unschedulable))
		for _, nc := range r.Replacements {
			out += fmt.Sprintf(" %s/%.4f/%d", nc.InstanceType.Name, nc.Price(), len(nc.Pods))
		}
		return out
	}
	first := map[string]string{}
	for _, c := range cands {
		r, err := cluster.TryRemove(c.Node)
		if err != nil {
			t.Fatal(err)
		}
		first[c.Node] = describe(r)
	}
	for i := len(cands) - 1; i >= 0; i-- {
		r, _ := cluster.TryRemove(cands[i].Node)
		if got := describe(r); got != first[cands[i].Node] {
			t.Fatalf("%s: %s, first time %s", cands[i].Node, got, first[cands[i].Node])
		}
	}
	a := Consolidate(snap, append([]Candidate{}, cands...), Options{Allowed: map[string]int{"default": 100}})
	b := Consolidate(snap, append([]Candidate{}, cands...), Options{Allowed: map[string]int{"default": 100}})
	if fmt.Sprint(summary(a)) != fmt.Sprint(summary(b)) {
		t.Fatalf("decisions differ:\n%v\n%v", summary(a), summary(b))
	}
}

func summary(d Decision) []string {
	var out []string
	for _, c := range d.Commands {
		s := string(c.Reason)
		for _, cand := range c.Candidates {
			s += " " + cand.Node
		}
		for _, r := range c.Replacements {
			s += " -> " + r.InstanceType.Name
		}
		out = append(out, s)
	}
	return out
}

func TestCheaperOnly(t *testing.T) {
	offer := func(name string, prices ...float64) *cloudprovider.InstanceType {
		it := &cloudprovider.InstanceType{Name: name, Labels: map[string]string{corev1.LabelInstanceTypeStable: name}}
		for i, p := range prices {
			it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: fmt.Sprintf("us-east-1%c", 'a'+i), CapacityType: "on-demand", Price: p, Available: true})
		}
		return it
	}
	nc := func(types ...*cloudprovider.InstanceType) *scheduling.NewNodeClaim {
		var names []string
		for _, it := range types {
			names = append(names, it.Name)
		}
		o, _ := types[0].CheapestOffering(nil)
		return &scheduling.NewNodeClaim{NodePool: "default", InstanceTypes: types, InstanceType: types[0], Offering: o,
			Requirements: requirements.Requirements{corev1.LabelInstanceTypeStable: requirements.MustRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...)}}
	}
	for _, tc := range []struct {
		name    string
		repls   []*scheduling.NewNodeClaim
		price   float64
		want    [][]string // kept options per replacement
		wantWhy string
		// wantPrice, when set, is the first replacement's price after.
		wantPrice float64
	}{
		{name: "one replacement: options whose dearest zone is not cheaper go",
			repls: []*scheduling.NewNodeClaim{nc(offer("a", 0.05), offer("b", 0.06, 0.11), offer("c", 0.09), offer("own", 0.1))},
			price: 0.1, want: [][]string{{"a", "c"}}},
		{name: "two replacements share the savings: each must stay under its share",
			repls: []*scheduling.NewNodeClaim{nc(offer("a", 0.3), offer("a2", 0.45), offer("a3", 0.55)), nc(offer("b", 0.3), offer("b2", 0.49))},
			price: 1.0, want: [][]string{{"a", "a2"}, {"b", "b2"}}},
		{name: "no option left: the capacity shortage case",
			repls: []*scheduling.NewNodeClaim{nc(offer("own", 0.1), offer("dearer", 0.12))},
			price: 0.1, wantWhy: "no cheaper replacement"},
		{name: "pinned to a commitment's room: the room's price, not the type's list",
			repls: []*scheduling.NewNodeClaim{withRoom(nc(offer("m5.large", 0.096)), 0.0672)}, price: 0.08, want: [][]string{{"m5.large"}}},
		{name: "planned at list beside a room it was not handed: still at list",
			repls: []*scheduling.NewNodeClaim{atList(withRoom(nc(offer("m5.large", 0.096)), 0.0672))}, price: 0.2, want: [][]string{{"m5.large"}}, wantPrice: 0.096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := cheaperOnly(tc.repls, tc.price)
			if tc.wantWhy != "" {
				if !strings.Contains(why, tc.wantWhy) {
					t.Fatalf("why %q, want %q", why, tc.wantWhy)
				}
				return
			}
			if why != "" {
				t.Fatalf("refused: %s", why)
			}
			total := 0.0
			for i, r := range got {
				var names []string
				worst := 0.0
				for _, it := range r.InstanceTypes {
					names = append(names, it.Name)
					w, _ := worstPrice(it, offeringFilter(r.Requirements))
					if r.Offering.Limited() {
						w = r.Offering.Price // what the bill charges under the room
					}
					worst = max(worst, w)
				}
				total += worst
				if strings.Join(names, ",") != strings.Join(tc.want[i], ",") {
					t.Errorf("replacement %d keeps %v, want %v", i, names, tc.want[i])
				}
			}
			if tc.wantPrice != 0 && got[0].Price() != tc.wantPrice {
				t.Errorf("the replacement is priced $%.4f/h, want $%.4f/h", got[0].Price(), tc.wantPrice)
			}
			if total >= tc.price {
				t.Errorf("the replacements at their worst cost $%.2f/h, not less than $%.2f/h", total, tc.price)
			}
		})
	}
}

// TestRepackSeesNamespaces: repacking plans the set's pods on a trial
// snapshot; it must keep the cluster's namespaces, which a pod affinity's
// namespaceSelector matches, or pods that need a pod of a labelled
// namespace near them could go nowhere and the repack would be missed.
func TestRepackSeesNamespaces(t *testing.T) {
	affine := func(name string) *corev1.Pod {
		p := pod(name, "2500m", "1Gi")
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "data"}},
			TopologyKey:       corev1.LabelTopologyZone,
		}}}}
		return p
	}
	s := &setup{}
	for _, n := range []string{"a", "b", "c"} {
		s.add(node(n, "c6a.xlarge", "on-demand", affine(n+"-0")))
	}
	db := pod("db-0", "100m", "128Mi")
	db.Namespace, db.Labels = "data", map[string]string{"app": "db"}
	dbNode, _ := node("db", "c6a.large", "on-demand", db)
	snap := scheduling.Snapshot{Nodes: append(s.nodes, dbNode), NodePools: []scheduling.NodePool{{NodePool: guide03(), InstanceTypes: catalogTypes()}},
		Namespaces: map[string]map[string]string{"data": {"team": "data", corev1.LabelMetadataName: "data"}, "default": {corev1.LabelMetadataName: "default"}}}
	d := Consolidate(snap, s.cands, Options{Allowed: map[string]int{"default": 10}})
	if len(d.Commands) != 1 || len(d.Commands[0].Candidates) != 3 || len(d.Commands[0].Replacements) != 1 {
		t.Fatalf("want the three nodes repacked onto one, got %v; skipped %v", summary(d), d.Skipped)
	}
}

// atList unpins r from its room: the planner priced it at list, the room
// being another replacement's.
func atList(r *scheduling.NewNodeClaim) *scheduling.NewNodeClaim {
	r.Offering = r.InstanceType.Offerings[0]
	return r
}

// withRoom pins r to a commitment's room on its type at price, as the
// planner pins a replacement it handed one.
func withRoom(r *scheduling.NewNodeClaim, price float64) *scheduling.NewNodeClaim {
	room := r.Offering
	room.Price, room.Room = price, cloudprovider.Room{ID: "sp-1", Left: 1, Takes: price}
	it := r.InstanceType.Copy()
	it.Offerings = append(slices.Clone(it.Offerings), room)
	r.InstanceType, r.InstanceTypes, r.Offering = it, []*cloudprovider.InstanceType{it}, room
	return r
}

// TestSpotToSpotKeepsToThePool: spot-to-spot widens a replacement to the
// cheapest types that hold its pods, but only among the types the
// NodePool admits by name.
func TestSpotToSpotKeepsToThePool(t *testing.T) {
	decide := func(np *v1.NodePool) []string {
		s := (&setup{}).add(node("spot", "m5.4xlarge", "spot", pod("p", "1", "1Gi")))
		snap := scheduling.Snapshot{Nodes: s.nodes, NodePools: []scheduling.NodePool{{NodePool: np, InstanceTypes: catalogTypes()}}}
		d := Consolidate(snap, s.cands, Options{SpotToSpot: true, Allowed: map[string]int{"default": 1}})
		if len(d.Commands) != 1 || len(d.Commands[0].Replacements) != 1 {
			t.Fatalf("want one replacement, got %v; skipped %v", summary(d), d.Skipped)
		}
		var names []string
		for _, it := range d.Commands[0].Replacements[0].InstanceTypes {
			names = append(names, it.Name)
		}
		return names
	}
	reqs := []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")}
	first := decide(nodePool("default", reqs...))
	banned := first[:3]
	got := decide(nodePool("default", append(reqs, req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpNotIn, banned...))...))
	for _, name := range got {
		if slices.Contains(banned, name) {
			t.Fatalf("the replacement may launch as %s, which the NodePool excludes (NotIn %v): %v", name, banned, got)
		}
	}
}
