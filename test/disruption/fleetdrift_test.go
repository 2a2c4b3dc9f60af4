package disruption

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/api/meta"
)

// TestFleetDrift is issue 37's fleet-wide drift: 20 nodes of a pool with
// budget nodes: 50% drift at once (a template label, as an AMI release
// would). Ten replacements are in flight together, and meanwhile the empty
// node of another pool is deleted: a drift waiting for its replacements to
// boot holds up neither emptiness nor the rest of the loop. Instances take
// 30 s to boot, so the drift is still waiting when the other node's
// consolidateAfter (5 s) and validation (15 s) have passed.
//
// The budget stays at zero until all 20 are marked drifted: marking takes a
// NodeClaim write each, and on a loaded CI machine the first pass saw 2 of
// them, so that how many went together measured the marking, not the loop.
func TestFleetDrift(t *testing.T) {
	j := framework.StartJoiner(t, "DISRUPTION_POLL=2s", "KWOK_LAUNCH_DELAY=30s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	spare := strings.Replace(strings.SplitN(framework.PoolAndClass, "---\n", 2)[1], "metadata: {name: default}", "metadata: {name: spare}", 1)
	// Tainted, so that only solo's pod lands there.
	spare = strings.Replace(spare, "  template:\n", "  disruption: {consolidateAfter: 5s}\n  template:\n    metadata: {labels: {pool: spare}}\n", 1)
	spare = strings.Replace(spare, "      requirements:\n", "      taints: [{key: spare, effect: NoSchedule}]\n      requirements:\n", 1)
	framework.Kubectl(t, budgetPool(`[{nodes: "0"}]`)+"---\n"+spare, "apply", "-f", "-")
	framework.Kubectl(t, apart(20), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("solo", 1, "250m", "256Mi", "      nodeSelector: {pool: spare}\n      tolerations: [{key: spare, operator: Exists}]\n"), "apply", "-f", "-")
	claims := framework.Initialized(t, 21)
	var spareClaim string
	for _, nc := range claims {
		if nc.Labels[v1.LabelNodePool] == "spare" {
			spareClaim = nc.Name
		}
	}
	framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`)
	framework.Eventually(t, 2*time.Minute, "the 20 nodes of pool default marked drifted", func() (bool, string) {
		n := 0
		for _, nc := range framework.NodeClaims(t) {
			if nc.Labels[v1.LabelNodePool] == "default" && meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted) {
				n++
			}
		}
		return n == 20, fmt.Sprintf("%d drifted", n)
	})
	framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", `{"spec":{"disruption":{"budgets":[{"nodes":"50%"}]}}}`)
	framework.Kubectl(t, "", "delete", "deployment", "solo")

	// Watch the NodeClaims: the most replacements launching at once, and
	// whether the spare node went while one still was.
	most, spareWentDuringDrift := 0, false
	framework.Eventually(t, 3*time.Minute, "ten replacements in flight together, and the empty node deleted meanwhile", func() (bool, string) {
		launching, spareThere := 0, false
		for _, nc := range framework.NodeClaims(t) {
			if _, ok := nc.Annotations[v1.AnnotationReplacing]; ok && !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				launching++
			}
			if nc.Name == spareClaim && nc.DeletionTimestamp == nil {
				spareThere = true
			}
		}
		most = max(most, launching)
		if !spareThere && launching > 0 {
			spareWentDuringDrift = true
		}
		return most >= 10 && spareWentDuringDrift, fmt.Sprintf("at most %d replacements launching at once; empty node deleted while one was: %v", most, spareWentDuringDrift)
	})
	if most > 10 {
		t.Fatalf("%d replacements launching at once, beyond the budget of 10", most)
	}
	if n := strings.Count(j.Logs(), "via replace, terminating 10 nodes"); n == 0 {
		t.Fatalf("no drift of ten nodes in one decision:\n%s", framework.TailLines(j.Logs(), 40))
	}
	t.Logf("fleet drift of 20 under nodes: 50%%: %d replacements in flight together; the empty node of pool spare deleted meanwhile", most)
}
