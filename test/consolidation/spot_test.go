package consolidation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
)

// TestSpotToSpot scales a spot workload down to one pod. Without the
// SpotToSpotConsolidation gate the spot node stays and says why; with it,
// the node is replaced by a cheaper spot node that may launch as any of the
// 15 cheapest types that fit, and only as spot.
func TestSpotToSpot(t *testing.T) {
	cases := []struct {
		name string
		gate string
	}{
		{name: "without the gate the node stays", gate: "SpotToSpotConsolidation=false"},
		{name: "with the gate a cheaper spot node replaces it", gate: "SpotToSpotConsolidation=true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := framework.StartJoiner(t, "DISRUPTION_POLL=2s", "FEATURE_GATES="+tc.gate)
			t.Cleanup(func() { framework.ResetCluster(t) })
			pool := strings.Replace(framework.PoolAndClass, "values: [on-demand]", "values: [spot]", 1)
			pool = strings.Replace(pool, "  template:\n", "  disruption: {consolidateAfter: 5s}\n  template:\n", 1)
			framework.Kubectl(t, pool, "apply", "-f", "-")
			framework.Kubectl(t, framework.Deployment("inflate", 5, "1", "1536Mi", ""), "apply", "-f", "-")
			framework.Eventually(t, 2*time.Minute, "5 pods running", func() (bool, string) {
				n, _ := framework.Running(t, map[string]string{"app": "inflate"})
				return n == 5, fmt.Sprint(n)
			})
			before := map[string]bool{}
			for _, nc := range framework.NodeClaims(t) {
				if ct := nc.Labels[v1.LabelCapacityType]; ct != v1.CapacityTypeSpot {
					t.Fatalf("scale-up launched %s", ct)
				}
				before[nc.Name] = true
			}
			framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas=1")
			if !strings.HasSuffix(tc.gate, "true") {
				// An emptied node may go; the one with the pod stays.
				var kept v1.NodeClaim
				framework.Eventually(t, 2*time.Minute, "a DisruptionBlocked event on the spot NodeClaim left", func() (bool, string) {
					claims := framework.NodeClaims(t)
					if len(claims) != 1 || !before[claims[0].Name] {
						return false, fmt.Sprintf("%d claims", len(claims))
					}
					kept = claims[0]
					out := framework.Kubectl(t, "", "get", "events", "--field-selector", "reason=DisruptionBlocked,involvedObject.name="+kept.Name, "-o", "custom-columns=MSG:.message", "--no-headers")
					return strings.Contains(out, "SpotToSpotConsolidation is disabled"), out
				})
				// The event comes from a decision that weighed the node with
				// its one pod, found a cheaper spot replacement and declined
				// it for the gate; nothing may have been done to it.
				if claims := framework.NodeClaims(t); len(claims) != 1 || claims[0].Name != kept.Name || claims[0].DeletionTimestamp != nil {
					t.Fatalf("the spot node was disrupted without the gate")
				}
				if j.Decided(kept.Name, kept.Status.NodeName) {
					t.Fatalf("a disruption of the spot node was decided without the gate")
				}
				return
			}
			var repl v1.NodeClaim
			framework.Eventually(t, 2*time.Minute, "the spot node replaced", func() (bool, string) {
				claims := framework.NodeClaims(t)
				n, _ := framework.Running(t, map[string]string{"app": "inflate"})
				if len(claims) != 1 || before[claims[0].Name] || n != 1 {
					return false, fmt.Sprintf("%d claims, %d running", len(claims), n)
				}
				repl = claims[0]
				return true, ""
			})
			for _, r := range repl.Spec.Requirements {
				switch r.Key {
				case corev1.LabelInstanceTypeStable:
					if len(r.Values) != 15 {
						t.Errorf("replacement may launch as %d types, want 15: %v", len(r.Values), r.Values)
					}
				case v1.LabelCapacityType:
					if len(r.Values) != 1 || r.Values[0] != v1.CapacityTypeSpot {
						t.Errorf("replacement capacity types %v, want [spot]", r.Values)
					}
				}
			}
			t.Logf("replaced by a %s spot node", repl.Labels[corev1.LabelInstanceTypeStable])
		})
	}
}
