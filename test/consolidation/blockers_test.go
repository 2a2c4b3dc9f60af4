package consolidation

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// explainer runs `joiner explain node` against the controller's metrics
// port.
func explainer(port int) func(string) (string, error) {
	return func(name string) (string, error) {
		out, err := exec.Command(framework.Binary, "explain", "node", name, "--endpoint", fmt.Sprintf("http://127.0.0.1:%d", port)).CombinedOutput()
		return string(out), err
	}
}

// stillKept waits for the disruption loop to decide three more times, or
// for old to be disrupted, and then checks that it was not, and that
// `joiner explain node` keeps it for want. Decisions run one at a time,
// each logging "evaluated consolidation" once it has decided and before it
// acts: the second line from now is a decision begun after now, and the
// third shows that one has been carried out.
func stillKept(t *testing.T, j *framework.Joiner, old v1.NodeClaim, explainNode func(string) (string, error), want string) {
	t.Helper()
	disrupted := func() bool {
		claims := framework.NodeClaims(t)
		return len(claims) != 1 || claims[0].Name != old.Name || claims[0].DeletionTimestamp != nil || j.Decided(old.Name, old.Status.NodeName)
	}
	from := j.Count("evaluated consolidation")
	framework.Eventually(t, time.Minute, "three more consolidation decisions", func() (bool, string) {
		n := j.Count("evaluated consolidation") - from
		return n >= 3 || disrupted(), fmt.Sprintf("%d so far", n)
	})
	claims := framework.NodeClaims(t)
	if len(claims) != 1 || claims[0].Name != old.Name || claims[0].DeletionTimestamp != nil {
		t.Fatalf("the node was disrupted: %d claims", len(claims))
	}
	if j.Decided(old.Name, old.Status.NodeName) {
		t.Fatalf("a disruption of the node was decided")
	}
	out, err := explainNode(old.Status.NodeName)
	if err != nil || !strings.Contains(out, "kept: ") || !strings.Contains(out, want) {
		t.Errorf("joiner explain node %s: %v\n%s\nwant it kept for %q", old.Status.NodeName, err, out, want)
	}
}

// scaleWeb scales deployment web to n and waits until n of its pods are
// left.
func scaleWeb(t *testing.T, n int) {
	t.Helper()
	framework.Kubectl(t, "", "scale", "deployment/web", fmt.Sprintf("--replicas=%d", n))
	framework.Eventually(t, time.Minute, "the scale-down done", func() (bool, string) {
		var pods corev1.PodList
		if err := framework.Kube.List(t.Context(), &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == n, fmt.Sprintf("%d pods", len(pods.Items))
	})
}

// TestMoreBlockers plants the blockers TestEmptinessAndProtection does not:
// a budget in its scheduled window, pods that fit nowhere else (the pool's
// limits leave no room for a replacement), consolidateAfter not yet
// passed, a node that never initializes, and a node nominated for a pod
// still pending. In each, `joiner explain node` names the blocker, and
// where the controller emits one, the DisruptionBlocked event does too.
func TestMoreBlockers(t *testing.T) {
	port := framework.FreePort(t)
	j := framework.StartJoiner(t, "DISRUPTION_POLL=2s", "LOG_LEVEL=debug", fmt.Sprintf("METRICS_PORT=%d", port))
	explainNode := explainer(port)
	disruption := func(block string) string {
		return strings.Replace(framework.PoolAndClass, "  template:\n", "  disruption: "+block+"\n  template:\n", 1)
	}
	// A window that opened at the top of this hour and closes in two.
	hour := time.Now().UTC().Hour()
	window := fmt.Sprintf("0 %d * * *", hour)
	web := framework.Deployment("web", 3, "1", "1Gi", "")
	cases := []struct {
		name     string
		pool     string
		workload string
		// scaleTo is the replica count once the node is up; -1 leaves it.
		scaleTo int
		// uninitialized: the node never initializes (a startup taint that
		// nothing removes).
		uninitialized bool
		// plant runs once the node is up and scaled.
		plant func(t *testing.T, node string)
		// wantEvent is the DisruptionBlocked reason the NodeClaim gets;
		// empty when the controller gives none for this blocker.
		wantEvent string
		// wantExplain is what explain says, when it is not wantEvent.
		wantExplain string
	}{
		{name: "a budget in its scheduled window",
			pool:     disruption(fmt.Sprintf(`{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 5s, budgets: [{nodes: "10%%"}, {nodes: "0", schedule: %q, duration: 2h}]}`, window)),
			workload: web, scaleTo: 1,
			wantEvent: fmt.Sprintf(`budgets[1] (nodes: "0", schedule: %q, duration: 2h0m0s) is active from %s until %s`, window,
				time.Now().UTC().Truncate(time.Hour).Format(time.RFC3339), time.Now().UTC().Truncate(time.Hour).Add(2*time.Hour).Format(time.RFC3339))},
		{name: "pods that fit nowhere else: the limits leave no room for a replacement",
			pool:     strings.Replace(disruption(`{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 5s}`), "  template:\n", "  limits: {cpu: \"4\"}\n  template:\n", 1),
			workload: web, scaleTo: 1, wantEvent: "its pods would not fit elsewhere: pod default/web-"},
		{name: "consolidateAfter not yet passed",
			pool:     disruption(`{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1h}`),
			workload: web, scaleTo: 1, wantExplain: "consolidateAfter (1h0m0s) has not passed: its pods last changed at"},
		{name: "a node not initialized",
			pool: strings.Replace(disruption(`{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 5s}`), "      requirements:\n",
				"      startupTaints: [{key: example.com/agent-not-ready, effect: NoSchedule}]\n      requirements:\n", 1),
			workload: framework.Deployment("web", 1, "1", "1Gi", ""), scaleTo: -1, uninitialized: true,
			wantExplain: "not initialized: disruption waits for its NodeClaim's Initialized condition"},
		{name: "a node nominated for a pending pod",
			pool:     disruption(`{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 5s}`),
			workload: web, scaleTo: 1, plant: pendOnSecondScheduler,
			wantEvent: "nominated for pending pod default/batch, which the provisioner launched or chose it for"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { framework.ResetCluster(t) })
			framework.Kubectl(t, tc.pool, "apply", "-f", "-")
			framework.Kubectl(t, tc.workload, "apply", "-f", "-")
			var old v1.NodeClaim
			if tc.uninitialized {
				old = framework.Registered(t)[0]
			} else {
				old = framework.Initialized(t, 1)[0]
				framework.Eventually(t, time.Minute, "pods running", func() (bool, string) {
					n, _ := framework.Running(t, map[string]string{"app": "web"})
					return n > 0, fmt.Sprint(n)
				})
			}
			if tc.scaleTo >= 0 {
				scaleWeb(t, tc.scaleTo)
			}
			if tc.plant != nil {
				tc.plant(t, old.Status.NodeName)
			}
			want := tc.wantExplain
			if tc.wantEvent != "" {
				want = tc.wantEvent
				framework.WaitForEvent(t, time.Minute, "DisruptionBlocked", old.Name, tc.wantEvent)
			}
			// The positive signal for the blockers without an event: the
			// controller's board says it.
			framework.Eventually(t, time.Minute, "explain names the blocker", func() (bool, string) {
				out, _ := explainNode(old.Status.NodeName)
				return strings.Contains(out, want), out
			})
			if tc.uninitialized {
				// No candidate, so no decision to wait for: the node is
				// still there and still not initialized.
				claims := framework.NodeClaims(t)
				if len(claims) != 1 || claims[0].Name != old.Name || framework.Condition(claims[0], v1.ConditionTypeInitialized) == "True/Initialized" {
					t.Fatalf("want the one NodeClaim %s, still not initialized; have %d", old.Name, len(claims))
				}
				return
			}
			stillKept(t, j, old, explainNode, want)
		})
	}
}

// pendOnSecondScheduler leaves a pod pending that the provisioner plans
// onto node: it belongs to a scheduler that is not running, which is why
// kube-scheduler never binds it, and which (as a second scheduler does
// when it finds no room) marked it unschedulable.
func pendOnSecondScheduler(t *testing.T, node string) {
	t.Helper()
	framework.Kubectl(t, `apiVersion: v1
kind: Pod
metadata: {name: batch, labels: {app: batch}}
spec:
  schedulerName: batch-scheduler
  containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`, "apply", "-f", "-")
	framework.Kubectl(t, `{"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available: batch-scheduler found no room."}]}}`,
		"patch", "pod", "batch", "--subresource=status", "--type=merge", "--patch-file=/dev/stdin")
	framework.WaitForEvent(t, time.Minute, "Nominated", "batch", node)
}
