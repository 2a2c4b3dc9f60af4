package disruption

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// budgetPool is the test pool with consolidateAfter 5s and the given budgets.
func budgetPool(budgets string) string {
	return strings.Replace(framework.PoolAndClass, "  template:\n",
		"  disruption: {consolidateAfter: 5s, budgets: "+budgets+"}\n  template:\n", 1)
}

// apart is n pods that each need a node of their own.
func apart(n int) string {
	return framework.Deployment("web", n, "250m", "256Mi", `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}
`)
}

func TestBudgets(t *testing.T) {
	now := time.Now().UTC()
	inWindow := fmt.Sprintf("%d %d * * *", now.Add(-time.Minute).Minute(), now.Add(-time.Minute).Hour())
	later := now.Add(3 * time.Hour)
	outOfWindow := fmt.Sprintf("%d %d * * *", later.Minute(), later.Hour())
	cases := []struct {
		name    string
		budgets string
		// drift patches the NodePool so its nodes drift instead of emptying them.
		drift bool
		// wantFirst is the first decision's log fragment, or "" when none may come.
		wantFirst string
	}{
		{name: "a percentage limits how many go at once", budgets: `[{nodes: "50%"}]`, wantFirst: "via delete, terminating 2 nodes"},
		{name: "a count limits how many go at once", budgets: `[{nodes: "1"}]`, wantFirst: "via delete, terminating 1 nodes"},
		{name: "inside a schedule window the budget holds", budgets: fmt.Sprintf(`[{nodes: "0", schedule: %q, duration: 30m}]`, inWindow)},
		{name: "outside the window it does not", budgets: fmt.Sprintf(`[{nodes: "0", schedule: %q, duration: 30m}]`, outOfWindow), wantFirst: "via delete, terminating 4 nodes"},
		{name: "a Drifted budget stops drift", budgets: `[{nodes: "0", reasons: [Drifted]}]`, drift: true},
		{name: "a Drifted budget leaves emptiness alone", budgets: `[{nodes: "0", reasons: [Drifted]}]`, wantFirst: "via delete, terminating 4 nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := framework.StartJoiner(t, "DISRUPTION_POLL=2s")
			t.Cleanup(func() { framework.ResetCluster(t) })
			// A decision's size is the budget's only when every node is
			// empty by then; the pods go one by one, so a case that counts
			// holds all disruption (nodes: "0") until the last pod is gone
			// and then sets its budget in one write.
			hold := tc.wantFirst != ""
			if hold {
				framework.Kubectl(t, budgetPool(`[{nodes: "0"}]`), "apply", "-f", "-")
			} else {
				framework.Kubectl(t, budgetPool(tc.budgets), "apply", "-f", "-")
			}
			framework.Kubectl(t, apart(4), "apply", "-f", "-")
			claims := framework.Initialized(t, 4)
			if tc.drift {
				framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`)
			} else {
				framework.Kubectl(t, "", "scale", "deployment/web", "--replicas=0")
			}
			if hold {
				framework.Eventually(t, time.Minute, "every web pod gone", func() (bool, string) {
					out := framework.Kubectl(t, "", "get", "pods", "-l", "app=web", "-o", "name")
					return strings.TrimSpace(out) == "", out
				})
				// And every node consolidatable (consolidateAfter past its
				// last pod): a decision that saw only some would be smaller
				// than the budget for that reason alone.
				framework.Eventually(t, time.Minute, "every NodeClaim consolidatable", func() (bool, string) {
					var states []string
					ready := 0
					for _, nc := range framework.NodeClaims(t) {
						c := framework.Condition(nc, v1.ConditionTypeConsolidatable)
						states = append(states, c)
						if strings.HasPrefix(c, "True/") {
							ready++
						}
					}
					return ready == 4, strings.Join(states, " ")
				})
				framework.Kubectl(t, budgetPool(tc.budgets), "apply", "-f", "-")
			}
			if tc.wantFirst == "" {
				// Each node gets a DisruptionBlocked event naming the budget
				// from the decision that weighed it and left it; once all
				// four have one, nothing may have been done to any. (Other
				// reasons may come first: a node is left alone while the
				// pods it was launched for still wait to bind.)
				for _, nc := range claims {
					msg := framework.WaitForEvent(t, time.Minute, "DisruptionBlocked", nc.Name, "disruption budget")
					if tc.drift && !strings.Contains(msg, "drifted") {
						t.Fatalf("%s was left because %q, want its drift held by the budget", nc.Name, msg)
					}
				}
				left := 0
				for _, nc := range framework.NodeClaims(t) {
					if nc.DeletionTimestamp == nil {
						left++
					}
				}
				if left != 4 || strings.Contains(j.Logs(), "disrupting nodeclaim") {
					t.Fatalf("%d nodeclaims left; the budget allowed a disruption", left)
				}
				return
			}
			framework.Eventually(t, time.Minute, "a decision", func() (bool, string) {
				return strings.Contains(j.Logs(), "disrupting nodeclaim"), ""
			})
			for _, line := range strings.Split(j.Logs(), "\n") {
				if strings.Contains(line, "disrupting nodeclaim") {
					if !strings.Contains(line, tc.wantFirst) {
						t.Fatalf("first decision %s, want %q", line, tc.wantFirst)
					}
					break
				}
			}
		})
	}
}

// TestRestartDuringReplacement kills the controller while a replacement
// launches and checks the cluster ends clean: one right-sized node, the pod
// running, no node without a NodeClaim and no NodeClaim stuck deleting.
func TestRestartDuringReplacement(t *testing.T) {
	first := framework.StartJoiner(t, "DISRUPTION_POLL=2s", "KWOK_LAUNCH_DELAY=5s")
	manifest := strings.Replace(framework.ReadSeed(t, "03-scale-up-down.yaml"), "consolidateAfter: 1m", "consolidateAfter: 5s", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	framework.Initialized(t, 1)
	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas=1")
	framework.Eventually(t, 2*time.Minute, "a replacement being launched", func() (bool, string) {
		return len(framework.NodeClaims(t)) == 2, fmt.Sprint(len(framework.NodeClaims(t)))
	})
	first.Stop(syscall.SIGKILL)
	framework.StartJoiner(t, "DISRUPTION_POLL=2s", "KWOK_LAUNCH_DELAY=5s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Eventually(t, 3*time.Minute, "one c6a.large left with the pod running", func() (bool, string) {
		claims := framework.NodeClaims(t)
		n, nodes := framework.Running(t, map[string]string{"app": "inflate"})
		if len(claims) != 1 || n != 1 {
			return false, fmt.Sprintf("%d claims, %d running on %v", len(claims), n, nodes)
		}
		return claims[0].Labels[corev1.LabelInstanceTypeStable] == "c6a.large" && claims[0].DeletionTimestamp == nil && nodes[claims[0].Status.NodeName] == 1,
			claims[0].Labels[corev1.LabelInstanceTypeStable]
	})
	var nodes corev1.NodeList
	if err := framework.Kube.List(t.Context(), &nodes, client.MatchingLabels{"joiner.sh/kwok-instance": "true"}); err != nil {
		t.Fatal(err)
	}
	claims := framework.NodeClaims(t)
	if len(nodes.Items) != 1 || nodes.Items[0].Spec.ProviderID != claims[0].Status.ProviderID {
		t.Fatalf("%d kwok nodes for 1 nodeclaim", len(nodes.Items))
	}
	for _, taint := range nodes.Items[0].Spec.Taints {
		if taint.Key == "karpenter.sh/disrupted" {
			t.Fatalf("the surviving node is still tainted disrupted")
		}
	}
}
