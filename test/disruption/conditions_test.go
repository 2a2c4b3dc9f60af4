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

// pool is the test NodePool with consolidateAfter and expireAfter set.
func pool(consolidateAfter, expireAfter string) string {
	return strings.Replace(strings.Replace(framework.PoolAndClass,
		"  template:\n", fmt.Sprintf("  disruption: {consolidateAfter: %s}\n  template:\n", consolidateAfter), 1),
		"      requirements:", "      expireAfter: "+expireAfter+"\n      requirements:", 1)
}

func condition(nc v1.NodeClaim, t string) string {
	if c := meta.FindStatusCondition(nc.Status.Conditions, t); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return "absent"
}

func TestConsolidatable(t *testing.T) {
	framework.StartJoiner(t)
	cases := []struct {
		name, after string
		want        string
	}{
		{name: "quiet for consolidateAfter", after: "2s", want: "True/Consolidatable"},
		{name: "Never disables it", after: "Never", want: "absent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { framework.ResetCluster(t) })
			framework.Kubectl(t, pool(tc.after, "720h"), "apply", "-f", "-")
			framework.Kubectl(t, framework.Deployment("web", 2, "500m", "512Mi", ""), "apply", "-f", "-")
			framework.Eventually(t, time.Minute, "the NodeClaim to initialize", func() (bool, string) {
				claims := framework.NodeClaims(t)
				return len(claims) == 1 && meta.IsStatusConditionTrue(claims[0].Status.Conditions, v1.ConditionTypeInitialized), fmt.Sprint(len(claims))
			})
			if tc.want == "absent" {
				time.Sleep(5 * time.Second)
				if got := condition(framework.NodeClaims(t)[0], v1.ConditionTypeConsolidatable); got != "absent" {
					t.Fatalf("Consolidatable %s", got)
				}
				return
			}
			framework.Eventually(t, 30*time.Second, "Consolidatable", func() (bool, string) {
				got := condition(framework.NodeClaims(t)[0], v1.ConditionTypeConsolidatable)
				return got == tc.want, got
			})
		})
	}
}

func TestDrift(t *testing.T) {
	framework.StartJoiner(t)
	cases := []struct {
		name   string
		change string // a merge patch of the NodePool
		want   string
	}{
		{name: "template labels change", change: `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`, want: "True/NodePoolDrifted"},
		{name: "taints change", change: `{"spec":{"template":{"spec":{"taints":[{"key":"dedicated","effect":"NoSchedule"}]}}}}`, want: "True/NodePoolDrifted"},
		{name: "requirements the node no longer meets", change: `{"spec":{"template":{"spec":{"requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]}]}}}}`, want: "True/RequirementsDrifted"},
		{name: "a limit change is not drift", change: `{"spec":{"limits":{"cpu":"100"}}}`, want: "absent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { framework.ResetCluster(t) })
			framework.Kubectl(t, pool("Never", "720h"), "apply", "-f", "-")
			framework.Kubectl(t, framework.Deployment("web", 1, "500m", "512Mi", ""), "apply", "-f", "-")
			framework.Eventually(t, time.Minute, "the NodeClaim to initialize", func() (bool, string) {
				claims := framework.NodeClaims(t)
				return len(claims) == 1 && meta.IsStatusConditionTrue(claims[0].Status.Conditions, v1.ConditionTypeInitialized), fmt.Sprint(len(claims))
			})
			framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", tc.change)
			if tc.want == "absent" {
				time.Sleep(5 * time.Second)
				if got := condition(framework.NodeClaims(t)[0], v1.ConditionTypeDrifted); got != "absent" {
					t.Fatalf("Drifted %s", got)
				}
				return
			}
			framework.Eventually(t, 30*time.Second, "Drifted "+tc.want, func() (bool, string) {
				got := condition(framework.NodeClaims(t)[0], v1.ConditionTypeDrifted)
				return got == tc.want, got
			})
		})
	}
}

func TestExpiration(t *testing.T) {
	j := framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, pool("Never", "20s"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 2, "500m", "512Mi", ""), "apply", "-f", "-")
	var first string
	framework.Eventually(t, time.Minute, "a NodeClaim", func() (bool, string) {
		claims := framework.NodeClaims(t)
		if len(claims) == 1 {
			first = claims[0].Name
		}
		return first != "", ""
	})
	framework.Eventually(t, 2*time.Minute, "the expired NodeClaim replaced and the pods running again", func() (bool, string) {
		claims := framework.NodeClaims(t)
		n, nodes := framework.Running(t, map[string]string{"app": "web"})
		for _, nc := range claims {
			if nc.Name == first {
				return false, "first still there"
			}
		}
		return n == 2 && len(claims) >= 1, fmt.Sprintf("%d running on %v", n, nodes)
	})
	if !strings.Contains(j.Logs(), `"reason":"expired"`) {
		t.Errorf("no expiration in the logs")
	}
}
