package scheduling

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

// catalogNode is a node of a catalog type in guide03Pool, with pods bound.
func catalogNode(t *testing.T, name, typ string, inFlight bool, pods ...*corev1.Pod) *Node {
	t.Helper()
	for _, it := range testCatalog(t) {
		if it.Name != typ {
			continue
		}
		labels := map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: "us-east-1a", v1.LabelCapacityType: "on-demand", v1.LabelNodePool: "default"}
		for k, v := range it.Labels {
			labels[k] = v
		}
		for _, p := range pods {
			p.Spec.NodeName = name
		}
		return &Node{Name: name, Labels: labels, Allocatable: it.Allocatable, Pods: pods, NodePool: "default", InFlight: inFlight}
	}
	t.Fatalf("no type %s", typ)
	return nil
}

// TestClusterPendingClaims checks that pending pods keep their claim on
// capacity in the consolidation model, and that capacity still launching
// takes no displaced pods.
func TestClusterPendingClaims(t *testing.T) {
	cases := []struct {
		name    string
		nodes   func(t *testing.T) []*Node
		pending []*corev1.Pod
		remove  string
		// wantReplacements after removing remove; -1 when unchecked.
		wantReplacements int
		// wantMoved counts the pods removing remove displaces.
		wantMoved int
		// wantCountingInFlight is the replacements when in-flight capacity counts.
		wantCountingInFlight int
		// wantClaims maps node names to how many pending pods claim them.
		wantClaims map[string]int
	}{
		{
			name: "without pending pods, a node's pod moves into another's room",
			nodes: func(t *testing.T) []*Node {
				return []*Node{catalogNode(t, "a", "c6a.xlarge", false), catalogNode(t, "b", "c6a.large", false, mkPod("b-0", "1", "1Gi"))}
			},
			remove: "b", wantReplacements: 0, wantMoved: 1, wantCountingInFlight: 0,
		},
		{
			name: "a pending pod's claim on a node's room is not free room",
			nodes: func(t *testing.T) []*Node {
				return []*Node{catalogNode(t, "a", "c6a.xlarge", false), catalogNode(t, "b", "c6a.large", false, mkPod("b-0", "1", "1Gi"))}
			},
			pending: []*corev1.Pod{mkPod("p-0", "3", "1Gi")},
			remove:  "b", wantReplacements: 1, wantMoved: 1, wantCountingInFlight: 1,
			wantClaims: map[string]int{"a": 1},
		},
		{
			name: "an empty node that pending pods will bind to is not empty (after a restart, no nomination needed)",
			nodes: func(t *testing.T) []*Node {
				return []*Node{catalogNode(t, "launched-for-p", "c6a.xlarge", false)}
			},
			pending: []*corev1.Pod{mkPod("p-0", "1500m", "1Gi"), mkPod("p-1", "1500m", "1Gi")},
			remove:  "launched-for-p", wantReplacements: 1, wantMoved: 2, wantCountingInFlight: 1,
			wantClaims: map[string]int{"launched-for-p": 2},
		},
		{
			name: "displaced pods do not rely on capacity still launching",
			nodes: func(t *testing.T) []*Node {
				return []*Node{catalogNode(t, "inflight", "c6a.2xlarge", true), catalogNode(t, "b", "c6a.large", false, mkPod("b-0", "1", "1Gi"))}
			},
			remove: "b", wantReplacements: 1, wantMoved: 1, wantCountingInFlight: 0,
		},
		{
			name: "pending pods claim initialized room before in-flight capacity",
			nodes: func(t *testing.T) []*Node {
				return []*Node{catalogNode(t, "a-inflight", "c6a.2xlarge", true), catalogNode(t, "z-ready", "c6a.xlarge", false), catalogNode(t, "b", "c6a.large", false, mkPod("b-0", "1", "1Gi"))}
			},
			pending: []*corev1.Pod{mkPod("p-0", "3", "1Gi"), mkPod("p-1", "3", "1Gi")},
			remove:  "b", wantReplacements: 1, wantMoved: 1, wantCountingInFlight: 0,
			wantClaims: map[string]int{"z-ready": 1, "a-inflight": 1},
		},
		{
			name: "a pending pod that fits nowhere claims nothing",
			nodes: func(t *testing.T) []*Node {
				return []*Node{catalogNode(t, "a", "c6a.xlarge", false), catalogNode(t, "b", "c6a.large", false, mkPod("b-0", "1", "1Gi"))}
			},
			pending: []*corev1.Pod{mkPod("huge", "64", "1Gi")},
			remove:  "b", wantReplacements: 0, wantMoved: 1, wantCountingInFlight: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := Snapshot{Nodes: tc.nodes(t), Pods: tc.pending, NodePools: []NodePool{{NodePool: guide03Pool(), InstanceTypes: testCatalog(t)}}}
			c := NewCluster(snap, Options{})
			r, err := c.TryRemove(tc.remove)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %v", r.Unschedulable[0].Reason)
			}
			if len(r.Replacements) != tc.wantReplacements || r.Moved != tc.wantMoved {
				t.Errorf("removing %s: %d replacements, %d moved; want %d, %d", tc.remove, len(r.Replacements), r.Moved, tc.wantReplacements, tc.wantMoved)
			}
			r, err = c.TryRemoveCountingInFlight(tc.remove)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Replacements) != tc.wantCountingInFlight {
				t.Errorf("counting in-flight capacity: %d replacements, want %d", len(r.Replacements), tc.wantCountingInFlight)
			}
			// The trials leave the model as it was.
			if again, _ := c.TryRemove(tc.remove); len(again.Replacements) != tc.wantReplacements {
				t.Errorf("after the trials: %d replacements, want %d", len(again.Replacements), tc.wantReplacements)
			}
			got := map[string]int{}
			for n, ps := range c.Claims() {
				got[n] = len(ps)
			}
			if len(got) != len(tc.wantClaims) {
				t.Errorf("claims %v, want %v", got, tc.wantClaims)
			}
			for n, k := range tc.wantClaims {
				if got[n] != k {
					t.Errorf("claims %v, want %v", got, tc.wantClaims)
				}
			}
		})
	}
}
