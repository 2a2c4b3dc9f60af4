package disruption

import (
	"math"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// quiet marks a candidate consolidatable, as Decide needs.
func quiet(n *scheduling.Node, c Candidate) (*scheduling.Node, Candidate) {
	c.Consolidatable = true
	return n, c
}

// launching is a NodeClaim of a catalog type still launching.
func launching(name, typ string, pods ...*corev1.Pod) *scheduling.Node {
	n, _ := node(name, typ, "on-demand", pods...)
	n.InFlight = true
	return n
}

func drifted(since time.Time) func(*scheduling.Node, Candidate) (*scheduling.Node, Candidate) {
	return func(n *scheduling.Node, c Candidate) (*scheduling.Node, Candidate) {
		c.DriftedSince = since
		return n, c
	}
}

// withoutPrice is a candidate whose offering left its pool, so has no price.
func withoutPrice(n *scheduling.Node, c Candidate) (*scheduling.Node, Candidate) {
	c.Price, c.Zone = math.Inf(1), "us-east-1a"
	return n, c
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	all := Options{Allowed: map[string]int{"default": 10}, AllowedEmpty: map[string]int{"default": 10}, AllowedDrift: map[string]int{"default": 10}}
	cases := []struct {
		name string
		// nodes and cands; inFlight nodes are not candidates.
		setup    func() *setup
		inFlight func() []*scheduling.Node
		pending  []*corev1.Pod
		pool     func(*v1.NodePool)
		opts     Options
		// want is the first command's reason and candidate nodes; "" for none.
		want      string
		wantNodes []string
		// wantSkipped maps nodes to a part of their reason.
		wantSkipped map[string]string
	}{
		{
			name: "without pending pods or capacity launching, the node whose pod fits elsewhere goes",
			setup: func() *setup {
				return (&setup{}).add(quiet(node("a", "c6a.large", "on-demand", pod("a-0", "1", "512Mi"))))
			},
			inFlight: func() []*scheduling.Node {
				n, _ := node("b", "c6a.xlarge", "on-demand")
				return []*scheduling.Node{n}
			},
			want: "Underutilized", wantNodes: []string{"a"},
		},
		{
			name: "pods pending for capacity being launched do not let a node's pods move into it",
			setup: func() *setup {
				return (&setup{}).add(quiet(node("a", "c6a.large", "on-demand", pod("a-0", "1", "512Mi"))))
			},
			inFlight:    func() []*scheduling.Node { return []*scheduling.Node{launching("nodeclaim/b", "c6a.xlarge")} },
			pending:     []*corev1.Pod{pod("p-0", "2", "1Gi")},
			wantSkipped: map[string]string{"a": WaitingForLaunchReason},
		},
		{
			name: "a node whose cheaper replacement would be the room of an uninitialized node waits for it",
			setup: func() *setup {
				return (&setup{}).add(quiet(node("a", "c6a.2xlarge", "on-demand", pod("a-0", "1", "512Mi"))))
			},
			inFlight: func() []*scheduling.Node {
				return []*scheduling.Node{launching("nodeclaim/never-initialized", "c6a.large")}
			},
			wantSkipped: map[string]string{"a": WaitingForLaunchReason},
		},
		{
			name: "after a restart, an empty node the pending pods will bind to stays (no nomination needed)",
			setup: func() *setup {
				return (&setup{}).add(quiet(node("launched-for-p", "c6a.xlarge", "on-demand")))
			},
			pending:     []*corev1.Pod{pod("p-0", "1500m", "1Gi"), pod("p-1", "1500m", "1Gi")},
			wantSkipped: map[string]string{"launched-for-p": "no cheaper replacement"},
		},
		{
			name: "the same node without the pending pods is empty and goes",
			setup: func() *setup {
				return (&setup{}).add(quiet(node("launched-for-p", "c6a.xlarge", "on-demand")))
			},
			want: "Empty", wantNodes: []string{"launched-for-p"},
		},
		{
			name:     "a busy cluster: pods pending for capacity elsewhere do not hold back an empty node",
			setup:    func() *setup { return (&setup{}).add(quiet(node("empty", "c6a.large", "on-demand"))) },
			inFlight: func() []*scheduling.Node { return []*scheduling.Node{launching("nodeclaim/big", "c6a.4xlarge")} },
			pending:  []*corev1.Pod{pod("p-0", "6", "1Gi"), pod("p-1", "6", "1Gi"), pod("never", "500", "1Gi")},
			want:     "Empty", wantNodes: []string{"empty"},
		},
		{
			name: "drift: an empty drifted node before the longest drifted busy one",
			setup: func() *setup {
				s := &setup{}
				s.add(drifted(t0)(node("busy", "c6a.large", "on-demand", pod("b-0", "1", "1Gi"))))
				return s.add(drifted(t0.Add(time.Hour))(node("idle", "c6a.large", "on-demand")))
			},
			opts: Options{Allowed: map[string]int{"default": 10}, AllowedEmpty: map[string]int{"default": 10}, AllowedDrift: map[string]int{"default": 1}},
			want: "Drifted", wantNodes: []string{"idle"},
		},
		{
			name: "emptiness before drift: an empty node quiet for consolidateAfter goes first, by the empty budget",
			setup: func() *setup {
				s := &setup{}
				s.add(drifted(t0)(node("busy", "c6a.large", "on-demand", pod("b-0", "1", "1Gi"))))
				return s.add(quiet(node("idle", "c6a.large", "on-demand")))
			},
			opts: Options{Allowed: map[string]int{"default": 0}, AllowedEmpty: map[string]int{"default": 1}, AllowedDrift: map[string]int{"default": 1}},
			want: "Empty", wantNodes: []string{"idle"},
		},
		{
			name: "emptiness before drift: the empty budget spent, drift goes",
			setup: func() *setup {
				s := &setup{}
				s.add(drifted(t0)(node("busy", "c6a.large", "on-demand", pod("b-0", "1", "1Gi"))))
				return s.add(quiet(node("idle", "c6a.large", "on-demand")))
			},
			opts: Options{Allowed: map[string]int{"default": 0}, AllowedEmpty: map[string]int{"default": 0}, AllowedDrift: map[string]int{"default": 1}},
			want: "Drifted", wantNodes: []string{"busy"},
		},
		{
			name: "drift: the longest drifted first among busy nodes",
			setup: func() *setup {
				s := &setup{}
				s.add(drifted(t0.Add(time.Hour))(node("newer", "c6a.large", "on-demand", pod("n-0", "1", "1Gi"))))
				return s.add(drifted(t0)(node("older", "c6a.large", "on-demand", pod("o-0", "1", "1Gi"))))
			},
			opts: Options{Allowed: map[string]int{"default": 10}, AllowedEmpty: map[string]int{"default": 10}, AllowedDrift: map[string]int{"default": 1}},
			want: "Drifted", wantNodes: []string{"older"},
			wantSkipped: map[string]string{"newer": "drifted, but the disruption budget"},
		},
		{
			name: "drift: empty drifted nodes go in a command of their own, first",
			setup: func() *setup {
				s := &setup{}
				s.add(drifted(t0)(node("busy-0", "c6a.large", "on-demand", pod("b-0", "1", "1Gi"))))
				s.add(drifted(t0.Add(time.Minute))(node("busy-1", "c6a.large", "on-demand", pod("b-1", "1", "1Gi"))))
				s.add(drifted(t0.Add(2 * time.Minute))(node("busy-2", "c6a.large", "on-demand", pod("b-2", "1", "1Gi"))))
				return s.add(drifted(t0.Add(time.Hour))(node("idle", "c6a.large", "on-demand")))
			},
			opts: Options{Allowed: map[string]int{"default": 10}, AllowedEmpty: map[string]int{"default": 10}, AllowedDrift: map[string]int{"default": 3}},
			want: "Drifted", wantNodes: []string{"idle"},
		},
		{
			name: "drift: every busy drifted node the budget allows goes in one command",
			setup: func() *setup {
				s := &setup{}
				s.add(drifted(t0)(node("busy-0", "c6a.large", "on-demand", pod("b-0", "1", "1Gi"))))
				s.add(drifted(t0.Add(time.Minute))(node("busy-1", "c6a.large", "on-demand", pod("b-1", "1", "1Gi"))))
				return s.add(drifted(t0.Add(2 * time.Minute))(node("busy-2", "c6a.large", "on-demand", pod("b-2", "1", "1Gi"))))
			},
			opts: Options{Allowed: map[string]int{"default": 10}, AllowedEmpty: map[string]int{"default": 10}, AllowedDrift: map[string]int{"default": 2}},
			want: "Drifted", wantNodes: []string{"busy-0", "busy-1"},
			wantSkipped: map[string]string{"busy-2": "drifted, but the disruption budget"},
		},
		{
			name: "drift: a blocked drifted node is passed over and says so",
			setup: func() *setup {
				s := &setup{}
				n, c := drifted(t0)(node("older", "c6a.large", "on-demand", pod("o-0", "1", "1Gi")))
				c.Blocked = "pod default/o-0 has do-not-disrupt"
				s.add(n, c)
				return s.add(drifted(t0.Add(time.Hour))(node("newer", "c6a.large", "on-demand", pod("n-0", "1", "1Gi"))))
			},
			want: "Drifted", wantNodes: []string{"newer"},
			wantSkipped: map[string]string{"older": "drifted, but pod default/o-0 has do-not-disrupt"},
		},
		{
			name: "drift: pods that would go to capacity not yet initialized wait for it",
			setup: func() *setup {
				return (&setup{}).add(drifted(t0)(node("old", "c6a.large", "on-demand", pod("o-0", "1", "1Gi"))))
			},
			inFlight: func() []*scheduling.Node {
				return []*scheduling.Node{launching("left-by-an-abandoned-drift", "c6a.large")}
			},
			wantSkipped: map[string]string{"old": "drifted, but " + WaitingForLaunchReason},
		},
		{
			name: "drift: a node with no known price (its zone left the class) is still replaced",
			setup: func() *setup {
				return (&setup{}).add(withoutPrice(drifted(t0)(node("left", "c6a.large", "on-demand", pod("l-0", "1", "1Gi")))))
			},
			want: "Drifted", wantNodes: []string{"left"},
		},
		{
			name: "consolidation: a node with no known price is left alone and says so",
			setup: func() *setup {
				return (&setup{}).add(quiet(withoutPrice(node("left", "c6a.2xlarge", "on-demand", pod("l-0", "1", "1Gi")))))
			},
			wantSkipped: map[string]string{"left": "no price known for on-demand c6a.2xlarge in us-east-1a"},
		},
		{
			name: "drift: a node only its pods block, with a terminationGracePeriod, is replaced anyway",
			setup: func() *setup {
				n, c := drifted(t0)(node("pinned", "c6a.large", "on-demand", pod("p-0", "1", "1Gi")))
				c.Blocked, c.Forceable = "pod default/p-0 has do-not-disrupt", true
				return (&setup{}).add(n, c)
			},
			want: "Drifted", wantNodes: []string{"pinned"},
		},
		{
			name: "drift: the drift budget, not consolidation's, and its reason wins",
			setup: func() *setup {
				return (&setup{}).add(quiet(drifted(t0)(node("d", "c6a.2xlarge", "on-demand", pod("d-0", "1", "1Gi")))))
			},
			opts:        Options{Allowed: map[string]int{"default": 0}, AllowedEmpty: map[string]int{"default": 0}, AllowedDrift: map[string]int{"default": 0}},
			wantSkipped: map[string]string{"d": "drifted, but the disruption budget"},
		},
		{
			name: "drift blocked by its budget leaves consolidation free to act",
			setup: func() *setup {
				return (&setup{}).add(quiet(drifted(t0)(node("d", "c6a.2xlarge", "on-demand", pod("d-0", "1", "1Gi")))))
			},
			opts: Options{Allowed: map[string]int{"default": 1}, AllowedEmpty: map[string]int{"default": 1}, AllowedDrift: map[string]int{"default": 0}},
			want: "Underutilized", wantNodes: []string{"d"},
		},
		{
			name: "consolidation: a node not yet quiet for consolidateAfter is left without an event",
			setup: func() *setup {
				return (&setup{}).add(node("fresh", "c6a.large", "on-demand"))
			},
		},
		{
			name:        "consolidation: consolidateAfter Never says so",
			setup:       func() *setup { return (&setup{}).add(node("kept", "c6a.large", "on-demand")) },
			pool:        func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("Never") },
			wantSkipped: map[string]string{"kept": "consolidateAfter is Never"},
		},
		{
			name: "consolidation: a nominated node is left alone and says so",
			setup: func() *setup {
				n, c := quiet(node("nominated", "c6a.large", "on-demand"))
				c.Blocked = Nominated([]string{"default/p-0"})
				return (&setup{}).add(n, c)
			},
			wantSkipped: map[string]string{"nominated": "nominated for pending pod default/p-0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.setup()
			np := guide03()
			np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
			if tc.pool != nil {
				tc.pool(np)
			}
			snap := scheduling.Snapshot{Nodes: s.nodes, Pods: tc.pending, NodePools: []scheduling.NodePool{{NodePool: np, InstanceTypes: catalogTypes()}}}
			if tc.inFlight != nil {
				snap.Nodes = append(snap.Nodes, tc.inFlight()...)
			}
			opts := tc.opts
			if opts.Allowed == nil {
				opts = all
			}
			d := Decide(snap, s.cands, opts)
			switch {
			case tc.want == "" && len(d.Commands) > 0:
				t.Fatalf("commands %v, want none; skipped %v", summary(d), d.Skipped)
			case tc.want != "" && len(d.Commands) == 0:
				t.Fatalf("no command, want %s of %v; skipped %v", tc.want, tc.wantNodes, d.Skipped)
			case tc.want != "":
				cmd := d.Commands[0]
				var got []string
				for _, c := range cmd.Candidates {
					got = append(got, c.Node)
				}
				if string(cmd.Reason) != tc.want || strings.Join(got, ",") != strings.Join(tc.wantNodes, ",") {
					t.Fatalf("command %s of %v, want %s of %v; skipped %v", cmd.Reason, got, tc.want, tc.wantNodes, d.Skipped)
				}
			}
			for n, part := range tc.wantSkipped {
				if !strings.Contains(d.Skipped[n], part) {
					t.Errorf("node %s skipped for %q, want %q", n, d.Skipped[n], part)
				}
			}
			if tc.name == "consolidation: a node not yet quiet for consolidateAfter is left without an event" {
				if why, ok := d.Skipped["fresh"]; ok {
					t.Errorf("a reason for a node not yet consolidatable: %q", why)
				}
			}
		})
	}
}
