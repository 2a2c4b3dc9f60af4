package disruption

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptrTo[T any](v T) *T { return &v }

// A static pool's drifted nodes are replaced one for one by template
// nodes, as many at once as its drift budget and limits.nodes allow; it is
// never consolidated, and a pool over its replicas scales down first.
func TestStaticDrift(t *testing.T) {
	drifted := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	static := func(replicas int64, nodesLimit string) *v1.NodePool {
		np := guide03()
		np.Name = "default"
		np.Spec.Replicas = ptrTo(replicas)
		if nodesLimit != "" {
			np.Spec.Limits = v1.Limits{v1.ResourceNodes: resource.MustParse(nodesLimit)}
		}
		return np
	}
	cluster := func(n, driftedN int, marked int) (*setup, []*scheduling.Node) {
		s := &setup{}
		for i := 0; i < n; i++ {
			nd, c := node(strings.Repeat("n", 1)+string(rune('a'+i)), "c6a.large", "on-demand")
			if i < driftedN {
				c.DriftedSince = drifted.Add(time.Duration(i) * time.Minute)
			}
			nd.MarkedForDeletion = i >= n-marked
			c.Consolidatable = true
			s.add(nd, c)
		}
		return s, s.nodes
	}
	cases := []struct {
		name     string
		pool     *v1.NodePool
		nodes    int
		drifted  int
		marked   int
		budget   int
		want     int
		skipWhy  string
		blockOne bool
	}{
		{name: "every drifted node within the budget", pool: static(10, ""), nodes: 10, drifted: 10, budget: 10, want: 10},
		{name: "the budget bounds the batch", pool: static(10, ""), nodes: 10, drifted: 10, budget: 4, want: 4, skipWhy: "disruption budget"},
		{name: "limits.nodes bounds the batch", pool: static(10, "12"), nodes: 10, drifted: 10, budget: 4, want: 2, skipWhy: "limits.nodes (12)"},
		{name: "limits.nodes at replicas replaces none", pool: static(3, "3"), nodes: 3, drifted: 3, budget: 3, want: 0, skipWhy: "leaves no room"},
		{name: "a node being deleted counts against limits.nodes", pool: static(10, "12"), nodes: 11, drifted: 10, marked: 1, budget: 10, want: 1, skipWhy: "limits.nodes (12)"},
		{name: "a pool over its replicas scales down first", pool: static(2, ""), nodes: 3, drifted: 3, budget: 3, want: 0, skipWhy: "scales down first"},
		{name: "a blocked node stays", pool: static(3, ""), nodes: 3, drifted: 3, budget: 3, want: 2, blockOne: true, skipWhy: "do-not-disrupt"},
		{name: "no drift, no command", pool: static(3, ""), nodes: 3, drifted: 0, budget: 3, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, nodes := cluster(tc.nodes, tc.drifted, tc.marked)
			if tc.blockOne {
				s.cands[0].Blocked = "a pod has do-not-disrupt"
			}
			snap := scheduling.Snapshot{Nodes: nodes, Static: []scheduling.NodePool{{NodePool: tc.pool, InstanceTypes: catalogTypes()}}}
			d := Decide(snap, s.cands, Options{AllowedDrift: map[string]int{"default": tc.budget}, Allowed: map[string]int{"default": 10}, AllowedEmpty: map[string]int{"default": 10}})
			got := 0
			if len(d.Commands) > 0 {
				cmd := d.Commands[0]
				if !cmd.Static || cmd.Reason != v1.DisruptionReasonDrifted || len(cmd.Replacements) != len(cmd.Candidates) {
					t.Fatalf("command %+v: want a static drift replacing one for one", cmd)
				}
				for _, r := range cmd.Replacements {
					if r.NodePool != "default" || len(r.Pods) != 0 {
						t.Fatalf("replacement of pool %s with %d pods, want an empty node of the pool", r.NodePool, len(r.Pods))
					}
				}
				got = len(cmd.Candidates)
			}
			if got != tc.want {
				t.Fatalf("%d replaced, want %d (skipped %v)", got, tc.want, d.Skipped)
			}
			if tc.skipWhy != "" {
				found := false
				for _, why := range d.Skipped {
					found = found || strings.Contains(why, tc.skipWhy)
				}
				if !found {
					t.Errorf("skipped %v, want a reason with %q", d.Skipped, tc.skipWhy)
				}
			}
		})
	}
}

// Scaling a static pool down drops unlaunched NodeClaims first, then empty
// nodes, then the cheapest to empty, and nodes with a do-not-disrupt pod
// last.
func TestScaleDown(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	claim := func(name string, launched bool, age time.Duration) *v1.NodeClaim {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if launched {
			nc.Status.ProviderID, nc.Status.NodeName = "kwok://"+name, name
		}
		return nc
	}
	on := func(node string, p *corev1.Pod) *corev1.Pod { p.Spec.NodeName = node; return p }
	daemon := func(p *corev1.Pod) *corev1.Pod {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent"}}
		return p
	}
	dnd := func(p *corev1.Pod) *corev1.Pod {
		p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
		return p
	}
	claims := []*v1.NodeClaim{claim("dnd", true, time.Hour), claim("two", true, time.Hour), claim("one", true, time.Hour),
		claim("empty", true, time.Hour), claim("daemons-only", true, 2*time.Hour), claim("unlaunched", false, time.Minute)}
	byNode := map[string][]*corev1.Pod{
		"dnd":          {on("dnd", dnd(pod("a", "100m", "100Mi")))},
		"two":          {on("two", pod("b", "100m", "100Mi")), on("two", pod("c", "100m", "100Mi"))},
		"one":          {on("one", pod("d", "100m", "100Mi"))},
		"daemons-only": {on("daemons-only", daemon(pod("e", "100m", "100Mi")))},
	}
	cases := []struct {
		n    int
		want string
	}{
		{1, "unlaunched"},
		{3, "unlaunched,daemons-only,empty"},
		{5, "unlaunched,daemons-only,empty,one,two"},
		{6, "unlaunched,daemons-only,empty,one,two,dnd"},
	}
	for _, tc := range cases {
		var names []string
		for _, nc := range ScaleDown(claims, byNode, tc.n, now) {
			names = append(names, nc.Name)
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("dropping %d: %s, want %s", tc.n, got, tc.want)
		}
	}
}
