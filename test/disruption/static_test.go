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

// staticPool is the framework's class and a static NodePool of it with
// replicas, a taint and limits.nodes.
func staticPool(replicas int, limit int) string {
	pool := strings.Replace(framework.PoolAndClass, "metadata: {name: default}\nspec:\n  template:\n",
		fmt.Sprintf("metadata: {name: default}\nspec:\n  replicas: %d\n  limits: {nodes: %d}\n  template:\n    metadata: {labels: {kind: static}}\n", replicas, limit), 1)
	return strings.Replace(pool, "      requirements:\n", "      taints: [{key: static, effect: NoSchedule}]\n      requirements:\n", 1)
}

// claimsOf are the NodeClaims not being deleted, by name.
func claimsOf(t *testing.T) map[string]v1.NodeClaim {
	out := map[string]v1.NodeClaim{}
	for _, nc := range framework.NodeClaims(t) {
		if nc.DeletionTimestamp == nil {
			out[nc.Name] = nc
		}
	}
	return out
}

// waitCount waits until the pool has n NodeClaims, none being deleted,
// all initialized.
func waitCount(t *testing.T, n int) map[string]v1.NodeClaim {
	t.Helper()
	var got map[string]v1.NodeClaim
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%d initialized static NodeClaims and no other", n), func() (bool, string) {
		all := framework.NodeClaims(t)
		got = claimsOf(t)
		ready := 0
		for _, nc := range got {
			if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				ready++
			}
		}
		return len(all) == n && ready == n, fmt.Sprintf("%d NodeClaims, %d live, %d initialized", len(all), len(got), ready)
	})
	return got
}

// TestStaticCapacity is the StaticCapacity gate as a user drives it: a
// static pool comes up to its replicas with the template's labels and
// taints, follows kubectl scale up to limits.nodes and down, ignores
// pending pods, and replaces a drifted node one for one.
func TestStaticCapacity(t *testing.T) {
	j := framework.StartJoiner(t, "FEATURE_GATES=StaticCapacity=true", "DISRUPTION_POLL=2s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, staticPool(2, 4), "apply", "-f", "-")
	first := waitCount(t, 2)
	for _, nc := range first {
		if nc.Labels["kind"] != "static" || len(nc.Spec.Taints) != 1 || nc.Spec.Taints[0].Key != "static" {
			t.Errorf("nodeclaim %s: labels %v, taints %v; want the template's", nc.Name, nc.Labels, nc.Spec.Taints)
		}
	}

	// The scale subresource, as kubectl scale writes it; the limit stops
	// the pool at 4, and says so.
	framework.Kubectl(t, "", "scale", "nodepool", "default", "--replicas", "6")
	waitCount(t, 4)
	framework.Eventually(t, time.Minute, "the limit logged", func() (bool, string) {
		return j.Count("nodepool node limit reached") > 0, ""
	})
	if n := len(framework.NodeClaims(t)); n != 4 {
		t.Fatalf("%d NodeClaims over limits.nodes 4", n)
	}

	// A pending pod that only the static pool could run stays pending: a
	// static pool launches for its count alone.
	framework.Kubectl(t, framework.Deployment("waits", 1, "1", "1Gi", "      nodeSelector: {kind: static}\n"), "apply", "-f", "-")
	framework.WaitEvent(t, "Failed to schedule pod")
	if n := len(framework.NodeClaims(t)); n != 4 {
		t.Fatalf("%d NodeClaims after a pending pod, want the pool's 4", n)
	}
	framework.Kubectl(t, "", "delete", "deployment", "waits")

	framework.Kubectl(t, "", "scale", "nodepool", "default", "--replicas", "3")
	waitCount(t, 3)

	// Drift: a template annotation changes the pool's hash.
	before := claimsOf(t)
	framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", `{"spec":{"template":{"metadata":{"annotations":{"drift":"now"}}}}}`)
	framework.Eventually(t, 3*time.Minute, "every static node replaced", func() (bool, string) {
		now := claimsOf(t)
		replaced := 0
		for name, nc := range now {
			if _, old := before[name]; !old && nc.Annotations["drift"] == "now" && meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				replaced++
			}
		}
		return replaced == 3 && len(framework.NodeClaims(t)) == 3, fmt.Sprintf("%d replaced of %d", replaced, len(now))
	})
	if !strings.Contains(j.Logs(), `"reason":"drifted"`) {
		t.Errorf("no drift decision in the log")
	}
}
