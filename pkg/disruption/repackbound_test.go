package disruption

import (
	"fmt"
	"math/rand"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// TestRepackPruningChangesNothing checks that the sets setBound leaves
// unplanned could not have been chosen: repack with pruning and without
// picks the same nodes, the same replacements and the same saving, and
// with pruning it plans fewer times.
func TestRepackPruningChangesNothing(t *testing.T) {
	production := func(n int) func() (scheduling.Snapshot, []Candidate, map[string]int) {
		return func() (scheduling.Snapshot, []Candidate, map[string]int) { return productionCluster(n) }
	}
	scaledDown := func(n, budget int) func() (scheduling.Snapshot, []Candidate, map[string]int) {
		return func() (scheduling.Snapshot, []Candidate, map[string]int) {
			snap, cands := scaledDownCluster(n)
			return snap, cands, map[string]int{"default": budget}
		}
	}
	cases := []struct {
		name    string
		cluster func() (scheduling.Snapshot, []Candidate, map[string]int)
		opts    Options
	}{
		{"production 60", production(60), Options{}},
		{"production 60, spot to spot", production(60), Options{SpotToSpot: true}},
		{"production 200", production(200), Options{}},
		{"scaled down 30, budget 3", scaledDown(30, 3), Options{}},
		{"scaled down 40, budget 16", scaledDown(40, 16), Options{}},
	}
	for seed := int64(1); seed <= 12; seed++ {
		cases = append(cases, struct {
			name    string
			cluster func() (scheduling.Snapshot, []Candidate, map[string]int)
			opts    Options
		}{fmt.Sprintf("mixed, seed %d", seed), func() (scheduling.Snapshot, []Candidate, map[string]int) { return mixedCluster(seed) }, Options{}})
	}
	defer func() { pruneRepack = true }()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got [2]string
			var plans [2]int64
			for i, prune := range []bool{false, true} {
				pruneRepack = prune
				snap, cands, budget := c.cluster()
				before := repackPlans.Load()
				cmd, ok := repack(snap, newKubeModel(snap), cands, budget, c.opts, totalsByPool(snap, cands))
				plans[i] = repackPlans.Load() - before
				got[i] = fmt.Sprint(ok, " ", describe(cmd))
			}
			if got[0] != got[1] {
				t.Fatalf("pruning changed the choice:\nplanning every set: %s\npruned:             %s", got[0], got[1])
			}
			if plans[1] > plans[0] {
				t.Fatalf("pruning planned %d times, against %d without it", plans[1], plans[0])
			}
			t.Logf("%s; %d plans, %d without pruning", got[1], plans[1], plans[0])
		})
	}
}

// describe names a command's candidates, replacements and saving.
func describe(cmd Command) string {
	s := ""
	for _, c := range cmd.Candidates {
		s += c.Node + " "
	}
	s += "->"
	for _, r := range cmd.Replacements {
		s += " " + r.InstanceType.Name + "/" + r.Offering.CapacityType
	}
	return fmt.Sprintf("%s saving %.6f", s, cmd.Savings)
}

// mixedCluster is 8 to 24 nodes of assorted sizes and families, each
// filled to between a fifth and all of its room with pods of assorted
// shapes, under a budget of 2 to 12 nodes: sets of every size save
// something, and not always the largest most.
func mixedCluster(seed int64) (scheduling.Snapshot, []Candidate, map[string]int) {
	r := rand.New(rand.NewSource(seed))
	sizes := []string{"c6a.large", "c6a.xlarge", "m6a.xlarge", "r6a.xlarge", "c6a.2xlarge", "m6a.2xlarge", "r6a.2xlarge", "m6a.4xlarge", "c6a.4xlarge"}
	shapes := [][2]string{{"250m", "512Mi"}, {"500m", "2Gi"}, {"1", "2Gi"}, {"1", "6Gi"}, {"2", "4Gi"}, {"100m", "256Mi"}}
	s := &setup{}
	count := 8 + r.Intn(17)
	for i := 0; i < count; i++ {
		typ := sizes[r.Intn(len(sizes))]
		free := resources.FromResourceList(types2(typ).Allocatable)
		fill := 0.2 + 0.8*r.Float64()
		total := free
		var onNode []*corev1.Pod
		for j := 0; ; j++ {
			sh := shapes[r.Intn(len(shapes))]
			p := pod(fmt.Sprintf("n%d-p%d", i, j), sh[0], sh[1])
			req := resources.PodRequests(p)
			if !req.Fits(free) || total.Sub(free).Fraction(total) > fill {
				break
			}
			free = free.Sub(req)
			onNode = append(onNode, p)
		}
		s.add(node(fmt.Sprintf("node-%04d", i), typ, "on-demand", onNode...))
	}
	pool := nodePool("default", req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"), req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	snap := scheduling.Snapshot{Nodes: s.nodes, NodePools: []scheduling.NodePool{{NodePool: pool, InstanceTypes: catalogTypes()}}}
	return snap, s.cands, map[string]int{"default": 2 + r.Intn(11)}
}
