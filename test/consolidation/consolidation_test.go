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

// TestGuide03ScaleDown is the guides' walkthrough: five inflate pods on a
// c6a.2xlarge, scaled to one, end on the cheapest node that fits one, in
// order: old node tainted (so nothing new lands on it), replacement
// initialized, old node drained and deleted.
func TestGuide03ScaleDown(t *testing.T) {
	j := framework.StartJoiner(t, "DISRUPTION_POLL=2s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifest := strings.Replace(framework.ReadSeed(t, "03-scale-up-down.yaml"), "consolidateAfter: 1m", "consolidateAfter: 5s", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	old := framework.Initialized(t, 1)[0]
	if old.Labels[corev1.LabelInstanceTypeStable] != "c6a.2xlarge" {
		t.Fatalf("scale-up made %s", old.Labels[corev1.LabelInstanceTypeStable])
	}
	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas=1")
	var repl v1.NodeClaim
	framework.Eventually(t, 2*time.Minute, "the old node replaced and the pod running on the new one", func() (bool, string) {
		claims := framework.NodeClaims(t)
		n, nodes := framework.Running(t, map[string]string{"app": "inflate"})
		if len(claims) != 1 || claims[0].Name == old.Name || n != 1 || nodes[claims[0].Status.NodeName] != 1 {
			return false, fmt.Sprintf("%d claims, %d running on %v", len(claims), n, nodes)
		}
		repl = claims[0]
		return true, ""
	})
	// The cheapest node for one 1-cpu pod in the pool is a c6a.large.
	if typ := repl.Labels[corev1.LabelInstanceTypeStable]; typ != "c6a.large" {
		t.Errorf("replacement is %s, want c6a.large", typ)
	}
	lines := framework.ParseLogs(j.Logs())
	ready, tainted := framework.FirstAbout(lines, "initialized nodeclaim", repl.Name), framework.FirstAbout(lines, "tainted node", old.Status.NodeName)
	deletedNode, deletedClaim := framework.FirstAbout(lines, "deleted node", old.Status.NodeName), framework.FirstAbout(lines, "deleted nodeclaim", old.Name)
	if ready.IsZero() || tainted.IsZero() || deletedNode.IsZero() || deletedClaim.IsZero() ||
		!tainted.Before(ready) || !ready.Before(deletedNode) || deletedClaim.Before(deletedNode) {
		t.Errorf("order: old tainted %v, replacement initialized %v, node deleted %v, nodeclaim deleted %v", tainted, ready, deletedNode, deletedClaim)
	}
	if !strings.Contains(j.Logs(), "disrupting nodeclaim(s) via replace, terminating 1 nodes (1 pods) "+old.Status.NodeName+"/c6a.2xlarge/on-demand and replacing with on-demand node from types c6a.large") {
		t.Errorf("no Karpenter-style decision log")
	}
	out := framework.Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=Evicted", "-o", "custom-columns=MSG:.message")
	if !strings.Contains(out, old.Status.NodeName) {
		t.Errorf("no eviction event for the old node: %s", out)
	}
}

func TestDriftReplaces(t *testing.T) {
	framework.StartJoiner(t, "DISRUPTION_POLL=2s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolWith("Never", "720h"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 2, "500m", "512Mi", ""), "apply", "-f", "-")
	old := framework.Initialized(t, 1)[0]
	framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`)
	framework.Eventually(t, 2*time.Minute, "the drifted node replaced, pods running on a node with the new label", func() (bool, string) {
		claims := framework.NodeClaims(t)
		n, _ := framework.Running(t, map[string]string{"app": "web"})
		return len(claims) == 1 && claims[0].Name != old.Name && claims[0].Labels["team"] == "payments" && n == 2, fmt.Sprintf("%d claims, %d running", len(claims), n)
	})
}
