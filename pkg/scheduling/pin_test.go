package scheduling

import (
	"fmt"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

// mixedPods are n pods of each of the scale test's 28 shapes (seven CPU
// sizes times four memory ratios), every fifth shape spread over zones.
func mixedPods(n int) []*corev1.Pod {
	cpus := []int{100, 250, 500, 750, 1000, 1500, 2000}
	var out []*corev1.Pod
	for i := 0; i < 28; i++ {
		c, ratio := cpus[i%7], []int{1, 2, 4, 8}[i/7]
		app := fmt.Sprintf("app-%02d", i)
		opts := []podOpt{withLabels("app", app)}
		if i%5 == 0 {
			opts = append(opts, spread(corev1.LabelTopologyZone, 1, map[string]string{"app": app}))
		}
		out = append(out, replicas(n, app, fmt.Sprintf("%dm", c), fmt.Sprintf("%dMi", c*ratio*1024/1000), opts...)...)
	}
	return out
}

// launchedAs turns a plan's NodeClaims into in-flight nodes of the types it
// chose, named as a snapshot names NodeClaims without a node, and returns
// them with the nominations the plan made.
func launchedAs(p *Plan) ([]*Node, map[string]string) {
	var nodes []*Node
	nominated := map[string]string{}
	for i, nc := range p.NewNodeClaims {
		name := fmt.Sprintf("nodeclaim/%s-%d", nc.NodePool, i)
		labels := map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: nc.Offering.Zone,
			v1.LabelCapacityType: nc.Offering.CapacityType, v1.LabelNodePool: nc.NodePool}
		for k, v := range nc.InstanceType.Labels {
			labels[k] = v
		}
		nodes = append(nodes, &Node{Name: name, Labels: labels, Allocatable: nc.InstanceType.Allocatable, NodePool: nc.NodePool, InFlight: true})
		for _, pod := range nc.Pods {
			nominated[pod.Namespace+"/"+pod.Name] = name
		}
	}
	return nodes, nominated
}

// TestNominatedPodsStayPut: pods that an earlier plan put on nodes still
// launching go back on them where they fit, so a batch that comes while
// those nodes boot asks for no more; a pod whose node no longer has room,
// is being deleted or is gone is planned as any other.
func TestNominatedPodsStayPut(t *testing.T) {
	pool := []*v1.NodePool{guide03Pool()}
	cases := []struct {
		name string
		pods []*corev1.Pod
		// change edits the launched nodes and nominations before the replan.
		change func(t *testing.T, nodes []*Node, nominated map[string]string)
		// wantNew is how many NodeClaims the replan adds; wantMoved how
		// many pods it places off their nominated node.
		wantNew, wantMoved int
	}{
		{name: "mixed shapes come back to their nodes", pods: mixedPods(10)},
		{name: "a larger batch of mixed shapes", pods: mixedPods(40)},
		{name: "zone-spread pods, which need their pins in more than one pass", pods: replicas(60, "web", "500m", "1Gi",
			withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "web"}))},
		{name: "a node kube-scheduler filled with other pods", pods: replicas(3, "a", "1", "2Gi"),
			change: func(t *testing.T, nodes []*Node, _ map[string]string) {
				big := mkPod("other", nodes[0].Allocatable.Cpu().String(), "1Mi")
				big.Spec.NodeName = nodes[0].Name
				nodes[0].Pods = append(nodes[0].Pods, big)
			}, wantNew: 1, wantMoved: 3},
		{name: "a node being deleted", pods: replicas(3, "a", "1", "2Gi"),
			change:  func(t *testing.T, nodes []*Node, _ map[string]string) { nodes[0].MarkedForDeletion = true },
			wantNew: 1, wantMoved: 3},
		{name: "a nomination for a node the snapshot lacks", pods: replicas(3, "a", "1", "2Gi"),
			change: func(t *testing.T, nodes []*Node, nominated map[string]string) {
				for k := range nominated {
					nominated[k] = "nodeclaim/gone"
				}
			}, wantNew: 0, wantMoved: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			first := solve(t, pool, tc.pods)
			if len(first.Unschedulable) > 0 {
				t.Fatalf("first plan: %s", summary(first))
			}
			nodes, nominated := launchedAs(first)
			if tc.change != nil {
				tc.change(t, nodes, nominated)
			}
			want := map[string]string{}
			for k, v := range nominated {
				want[k] = v
			}
			second := solve(t, pool, tc.pods, func(s *Snapshot) { s.Nodes, s.Nominated = nodes, nominated })
			if len(second.Unschedulable) > 0 {
				t.Fatalf("replan: %s", summary(second))
			}
			if got := len(second.NewNodeClaims); got != tc.wantNew {
				t.Errorf("replan over %d launched nodes adds %d NodeClaims, want %d:\n%s", len(nodes), got, tc.wantNew, summary(second))
			}
			moved := 0
			for _, pod := range tc.pods {
				key := pod.Namespace + "/" + pod.Name
				if second.Existing[key] != want[key] {
					moved++
				}
			}
			if moved != tc.wantMoved {
				t.Errorf("%d of %d pods placed off their nominated node, want %d", moved, len(tc.pods), tc.wantMoved)
			}
		})
	}
}

// TestPinsTakeFewPasses: a zone spread refuses a pin that would put its
// zone two ahead, so pins taken in the pods' order (a node's pods one after
// another) wait pass after pass for the other zones: 117 passes for the
// Deployment below, 10 for the mixed shapes. Each node's pins spread over
// the group's, the zones fill side by side.
func TestPinsTakeFewPasses(t *testing.T) {
	cases := []struct {
		name      string
		pods      []*corev1.Pod
		maxPasses int
	}{
		{name: "one zone-spread Deployment", pods: replicas(600, "web", "250m", "512Mi", withLabels("app", "web"),
			spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "web"})), maxPasses: 1},
		{name: "mixed shapes, some spread", pods: mixedPods(40), maxPasses: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := []*v1.NodePool{guide03Pool()}
			first := solve(t, pool, tc.pods)
			nodes, nominated := launchedAs(first)
			snap := Snapshot{Pods: tc.pods, Nodes: nodes, Nominated: nominated, NodePools: []NodePool{{NodePool: pool[0], InstanceTypes: testCatalog(t)}}}
			s := newSolver(snap, Options{})
			s.buildGroups(snap)
			passes := s.pin(snap.Nominated)
			if len(s.plan.Existing) != len(tc.pods) {
				t.Fatalf("%d of %d pods pinned", len(s.plan.Existing), len(tc.pods))
			}
			if passes > tc.maxPasses {
				t.Errorf("pinning took %d passes, want at most %d", passes, tc.maxPasses)
			}
		})
	}
}
