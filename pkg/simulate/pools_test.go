package simulate

import (
	"strings"
	"testing"
	"time"
)

// spare is a second NodePool, of r types, which the default pool's weight
// keeps empty until the default pool goes.
const spare = `---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: spare
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [r]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 0s
`

// TestNodePoolDeleted checks a NodePool deleted mid-run: its nodes go,
// running or still launching, their pods are evicted under "deleted", and
// the pods run on the other pool's nodes, which no longer lose to the
// deleted pool's weight.
func TestNodePoolDeleted(t *testing.T) {
	cases := []struct {
		name string
		at   time.Duration
		// the web pods evicted: none while the pool's nodes are launching
		evicted int
	}{
		{"its nodes running", 30 * time.Minute, 10},
		{"its nodes launching", 20 * time.Second, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := scenario{policy: "WhenEmpty", weight: "10", extra: spare}
			trace := &Trace{Duration: d(time.Hour), Events: []Event{
				{At: d(0), Scale: &Scale{Deployment: "web", Replicas: 10}},
				{At: d(tc.at), Delete: &Delete{Kind: "NodePool", Name: "default"}},
			}}
			var before []string
			s := prepare(t, sc, trace)
			s.at(s.start.Add(tc.at-time.Second), func() {
				for _, n := range s.liveNodes() {
					before = append(before, n.name)
				}
			})
			res := s.play(trace, nil)
			if len(before) == 0 || !strings.HasPrefix(before[0], "default-") {
				t.Fatalf("before the deletion the nodes were %v, want the default pool's", before)
			}
			for _, name := range before {
				if n := s.nodes[name]; !n.gone {
					t.Errorf("node %s of the deleted pool is still up", name)
				}
			}
			if got := res.Summary.Disruptions[deletedReason]; got != len(before) {
				t.Errorf("%d nodes counted as deleted, want %d", got, len(before))
			}
			if got := res.Summary.EvictionsByReason[deletedReason]; got != tc.evicted {
				t.Errorf("%d pods evicted as deleted, want %d", got, tc.evicted)
			}
			running := 0
			for _, p := range s.pods {
				if p.node != nil && p.node.pool == "spare" {
					running++
				}
			}
			if running != 10 {
				t.Errorf("%d web pods run on the spare pool at the end, want 10", running)
			}
		})
	}
}
