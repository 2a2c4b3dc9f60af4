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

// TestEmptinessAndProtection scales a one-node workload down and checks
// what happens to the node. Where the node must stay, the test waits for
// the DisruptionBlocked event that gives the expected reason on its
// NodeClaim, and then for the disruption loop to have weighed the node as
// it is after the scale-down (once it may be consolidated) in a whole
// decision, which its debug log line "evaluated consolidation" marks; only
// then does it check that nothing was done to the node. The event alone
// would not do: a reason that does not depend on the pods, such as
// do-not-disrupt, is given once, and may have been given before the
// scale-down.
//
// `joiner explain node`, asked of the controller's metrics port, names
// the same blocker for each kept node, and for the node replaced reports
// the move the controller then makes.
func TestEmptinessAndProtection(t *testing.T) {
	port := framework.FreePort(t)
	j := framework.StartJoiner(t, "DISRUPTION_POLL=2s", "LOG_LEVEL=debug", fmt.Sprintf("METRICS_PORT=%d", port))
	explainNode := explainer(port)
	pool := func(policy, after, budget string) string {
		return strings.Replace(framework.PoolAndClass, "  template:\n",
			fmt.Sprintf("  disruption: {consolidationPolicy: %s, consolidateAfter: %s, budgets: [{nodes: %q}]}\n  template:\n", policy, after, budget), 1)
	}
	cases := []struct {
		name     string
		pool     string
		workload string
		// scaleTo is the replica count after the node is up.
		scaleTo int
		// want: "removed" (no NodeClaim left), "kept" (the original stays),
		// or "replaced" (a different NodeClaim).
		want string
		// wantEvent is the DisruptionBlocked reason a kept node gets.
		wantEvent string
		// annotateNode puts karpenter.sh/do-not-disrupt on the Node once up.
		annotateNode bool
	}{
		{name: "an empty node is removed", pool: pool("WhenEmptyOrUnderutilized", "5s", "10%"),
			workload: framework.Deployment("web", 2, "1", "1Gi", ""), scaleTo: 0, want: "removed"},
		{name: "WhenEmpty never touches a node with pods", pool: pool("WhenEmpty", "5s", "10%"),
			workload: framework.Deployment("web", 3, "1", "1Gi", ""), scaleTo: 1, want: "kept", wantEvent: "consolidationPolicy is WhenEmpty"},
		{name: "WhenEmpty removes the empty node", pool: pool("WhenEmpty", "5s", "10%"),
			workload: framework.Deployment("web", 2, "1", "1Gi", ""), scaleTo: 0, want: "removed"},
		{name: "consolidateAfter Never keeps an empty node", pool: pool("WhenEmptyOrUnderutilized", "Never", "10%"),
			workload: framework.Deployment("web", 2, "1", "1Gi", ""), scaleTo: 0, want: "kept", wantEvent: "consolidateAfter is Never"},
		{name: "a zero budget blocks consolidation", pool: pool("WhenEmptyOrUnderutilized", "5s", "0"),
			workload: framework.Deployment("web", 3, "1", "1Gi", ""), scaleTo: 1, want: "kept", wantEvent: "disruption budget"},
		{name: "do-not-disrupt on a pod blocks consolidation", pool: pool("WhenEmptyOrUnderutilized", "5s", "10%"),
			workload: strings.Replace(framework.Deployment("web", 3, "1", "1Gi", ""), "metadata: {labels: {app: web}}", "metadata: {labels: {app: web}, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}", 1),
			scaleTo:  1, want: "kept", wantEvent: "has \"karpenter.sh/do-not-disrupt: true\""},
		{name: "do-not-disrupt with a duration on a pod blocks consolidation", pool: pool("WhenEmptyOrUnderutilized", "5s", "10%"),
			workload: strings.Replace(framework.Deployment("web", 3, "1", "1Gi", ""), "metadata: {labels: {app: web}}", "metadata: {labels: {app: web}, annotations: {karpenter.sh/do-not-disrupt: \"1h\"}}", 1),
			scaleTo:  1, want: "kept", wantEvent: "has \"karpenter.sh/do-not-disrupt: 1h\""},
		{name: "do-not-disrupt on the Node blocks consolidation", pool: pool("WhenEmptyOrUnderutilized", "5s", "10%"),
			workload: framework.Deployment("web", 3, "1", "1Gi", ""), scaleTo: 1, annotateNode: true,
			want: "kept", wantEvent: "node has \"karpenter.sh/do-not-disrupt: true\""},
		{name: "a node no cheaper type can replace is kept", pool: pool("WhenEmptyOrUnderutilized", "5s", "10%"),
			workload: framework.Deployment("web", 1, "1", "1Gi", ""), scaleTo: 1, want: "kept", wantEvent: "no cheaper replacement"},
		{name: "a PDB allowing no eviction keeps the node", pool: pool("WhenEmptyOrUnderutilized", "5s", "10%"),
			workload: framework.Deployment("web", 3, "1", "1Gi", "") + `---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: web}}
`, scaleTo: 1, want: "kept", wantEvent: "PDB default/web blocks the eviction of pod"},
		{name: "without protection the same node is replaced", pool: pool("WhenEmptyOrUnderutilized", "5s", "10%"),
			workload: framework.Deployment("web", 3, "1", "1Gi", ""), scaleTo: 1, want: "replaced"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { framework.ResetCluster(t) })
			framework.Kubectl(t, tc.pool, "apply", "-f", "-")
			framework.Kubectl(t, tc.workload, "apply", "-f", "-")
			old := framework.Initialized(t, 1)[0]
			framework.Eventually(t, time.Minute, "pods running", func() (bool, string) {
				n, _ := framework.Running(t, map[string]string{"app": "web"})
				return n > 0, fmt.Sprint(n)
			})
			if tc.annotateNode {
				framework.Kubectl(t, "", "annotate", "node", old.Status.NodeName, v1.AnnotationDoNotDisrupt+"=true")
			}
			// The control case: what explain says the move is, while the
			// controller makes it.
			moves := make(chan string, 1)
			if tc.want == "replaced" {
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					for {
						select {
						case <-stop:
							return
						case <-time.After(200 * time.Millisecond):
						}
						if out, err := explainNode(old.Status.NodeName); err == nil && strings.Contains(out, "being disrupted") {
							moves <- out
							return
						}
					}
				}()
			}
			scaleWeb(t, tc.scaleTo)
			switch tc.want {
			case "removed":
				framework.Eventually(t, time.Minute, "the node removed", func() (bool, string) {
					n := len(framework.NodeClaims(t))
					return n == 0, fmt.Sprint(n)
				})
			case "replaced":
				framework.Eventually(t, 2*time.Minute, "the node replaced", func() (bool, string) {
					claims := framework.NodeClaims(t)
					return len(claims) == 1 && claims[0].Name != old.Name, fmt.Sprint(len(claims))
				})
				var said string
				select {
				case said = <-moves:
				case <-time.After(30 * time.Second):
					t.Fatal("joiner explain node never said the node was being disrupted")
				}
				typ := framework.NodeClaims(t)[0].Labels[corev1.LabelInstanceTypeStable]
				if !strings.Contains(said, "replace with "+typ+" (") {
					t.Errorf("explain said %q; the controller replaced the node with a %s", said, typ)
				}
				t.Logf("explain said: %s", said)
			case "kept":
				framework.WaitForEvent(t, time.Minute, "DisruptionBlocked", old.Name, tc.wantEvent)
				// Both waits end early when the node is disrupted, for the
				// checks below to say so.
				disrupted := func() bool {
					claims := framework.NodeClaims(t)
					return len(claims) != 1 || claims[0].Name != old.Name || claims[0].DeletionTimestamp != nil || j.Decided(old.Name, old.Status.NodeName)
				}
				if !strings.Contains(tc.pool, "consolidateAfter: Never") {
					framework.Eventually(t, time.Minute, "the node Consolidatable", func() (bool, string) {
						if disrupted() {
							return true, ""
						}
						got := framework.Condition(framework.NodeClaims(t)[0], v1.ConditionTypeConsolidatable)
						return got == "True/Consolidatable", got
					})
				}
				stillKept(t, j, old, explainNode, tc.wantEvent)
			}
		})
	}
}
