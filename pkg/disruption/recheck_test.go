package disruption

import (
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRecheck(t *testing.T) {
	tainted := func(n *scheduling.Node, c Candidate) (*scheduling.Node, Candidate) {
		n.Taints = append(n.Taints, v1.DisruptedNoScheduleTaint)
		return n, c
	}
	cases := []struct {
		name    string
		setup   func() *setup
		pending []*corev1.Pod
		// cands are the command's candidates, by node name, in the order
		// the decision removed them.
		cands []string
		want  string
		// keep is how many candidates may go; every one when want is "",
		// none otherwise, unless set.
		keep int
	}{
		{
			name: "the replacement, initialized, holds the candidate's pods",
			setup: func() *setup {
				s := (&setup{}).add(tainted(node("old", "c6a.2xlarge", "on-demand", pod("inflate-0", "1", "1Gi"))))
				return s.add(node("replacement", "c6a.large", "on-demand"))
			},
			cands: []string{"old"},
		},
		{
			name: "a pod that arrived on the candidate before the taint no longer fits",
			setup: func() *setup {
				s := (&setup{}).add(tainted(node("old", "c6a.2xlarge", "on-demand", pod("inflate-0", "1", "1Gi"), pod("arrived", "1", "1Gi"))))
				return s.add(node("replacement", "c6a.large", "on-demand"))
			},
			cands: []string{"old"},
			want:  "its pods no longer fit on the other nodes and the replacements; 1 more node(s) would be needed",
		},
		{
			name: "a pending pod claims the replacement's room first",
			setup: func() *setup {
				s := (&setup{}).add(tainted(node("old", "c6a.2xlarge", "on-demand", pod("inflate-0", "1", "1Gi"))))
				return s.add(node("replacement", "c6a.large", "on-demand"))
			},
			pending: []*corev1.Pod{pod("newcomer", "1", "1Gi")},
			cands:   []string{"old"},
			want:    "no longer fit",
		},
		{
			name: "a delete whose pods still fit on another node",
			setup: func() *setup {
				s := (&setup{}).add(tainted(node("a", "c6a.large", "on-demand", pod("a-0", "1", "1Gi"))))
				return s.add(node("b", "c6a.2xlarge", "on-demand", pod("b-0", "1", "1Gi")))
			},
			cands: []string{"a"},
		},
		{
			name: "a delete whose room elsewhere was taken meanwhile",
			setup: func() *setup {
				s := (&setup{}).add(tainted(node("a", "c6a.large", "on-demand", pod("a-0", "1", "1Gi"))))
				return s.add(node("b", "c6a.2xlarge", "on-demand", pod("b-0", "1", "1Gi"), pod("b-1", "6", "1Gi")))
			},
			cands: []string{"a"},
			want:  "no longer fit",
		},
		{
			name: "a pod that fits nowhere",
			setup: func() *setup {
				return (&setup{}).add(tainted(node("a", "c6a.large", "on-demand", pod("a-0", "1", "1Gi"), pod("odd", "1", "1Gi"))))
			},
			cands: []string{"a"},
			want:  "no longer fit",
		},
		{
			name: "a deletion of two nodes whose room elsewhere holds both",
			setup: func() *setup {
				s := (&setup{}).add(tainted(node("a", "c6a.large", "on-demand", pod("a-0", "1", "1Gi"))))
				s.add(tainted(node("b", "c6a.large", "on-demand", pod("b-0", "1", "1Gi"))))
				return s.add(node("c", "c6a.2xlarge", "on-demand", pod("c-0", "5", "1Gi")))
			},
			cands: []string{"a", "b"},
		},
		{
			name: "a deletion of three nodes whose room elsewhere now holds two: the first two go",
			setup: func() *setup {
				s := (&setup{}).add(tainted(node("a", "c6a.large", "on-demand", pod("a-0", "1", "1Gi"))))
				s.add(tainted(node("b", "c6a.large", "on-demand", pod("b-0", "1", "1Gi"))))
				s.add(tainted(node("d", "c6a.large", "on-demand", pod("d-0", "1", "1Gi"))))
				return s.add(node("c", "c6a.2xlarge", "on-demand", pod("c-0", "5", "1Gi")))
			},
			cands: []string{"a", "b", "d"},
			want:  "1 more node(s) would be needed, for pod default/d-0 first",
			keep:  2,
		},
		{
			name: "a deletion of two nodes whose first no longer fits: none goes",
			setup: func() *setup {
				s := (&setup{}).add(tainted(node("a", "c6a.large", "on-demand", pod("a-0", "3", "1Gi"))))
				s.add(tainted(node("b", "c6a.large", "on-demand", pod("b-0", "1", "1Gi"))))
				return s.add(node("c", "c6a.2xlarge", "on-demand", pod("c-0", "5", "1Gi")))
			},
			cands: []string{"a", "b"},
			want:  "for pod default/a-0 first",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.setup()
			if tc.name == "a pod that fits nowhere" {
				s.nodes[0].Pods[1].Spec.NodeSelector = map[string]string{"no-such": "label"}
			}
			snap := scheduling.Snapshot{Nodes: s.nodes, Pods: tc.pending, NodePools: []scheduling.NodePool{{NodePool: guide03(), InstanceTypes: catalogTypes()}}}
			cmd := Command{Reason: v1.DisruptionReasonUnderutilized}
			for _, c := range s.cands {
				for _, name := range tc.cands {
					if c.Node == name {
						cmd.Candidates = append(cmd.Candidates, c)
					}
				}
			}
			keep, got := Recheck(snap, cmd, scheduling.Options{})
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			wantKeep := tc.keep
			if tc.want == "" {
				wantKeep = len(tc.cands)
			}
			if keep != wantKeep {
				t.Fatalf("%d candidate(s) may go, want %d", keep, wantKeep)
			}
		})
	}
}

func TestArrived(t *testing.T) {
	planned := pod("planned", "1", "1Gi")
	planned.UID = "u1"
	recreated := pod("planned", "1", "1Gi") // a StatefulSet pod, back under its name
	recreated.UID = "u2"
	daemon := pod("agent", "100m", "64Mi")
	daemon.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent"}}
	done := pod("job", "1", "1Gi")
	done.Status.Phase = corev1.PodSucceeded
	late := pod("late", "1", "1Gi")
	cases := []struct {
		name   string
		onNode []*corev1.Pod
		want   int
	}{
		{name: "only what was planned", onNode: []*corev1.Pod{planned}, want: 0},
		{name: "a DaemonSet pod and a finished pod are not arrivals", onNode: []*corev1.Pod{planned, daemon, done}, want: 0},
		{name: "a new pod", onNode: []*corev1.Pod{planned, late}, want: 1},
		{name: "a pod recreated under the same name is another pod", onNode: []*corev1.Pod{recreated}, want: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Arrived(map[string]bool{PodKey(planned): true}, tc.onNode); len(got) != tc.want {
				t.Fatalf("%d arrived, want %d", len(got), tc.want)
			}
		})
	}
}
