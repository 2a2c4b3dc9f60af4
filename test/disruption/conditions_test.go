package disruption

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// withControl applies poolYAML renamed "control" (its NodePool and its own
// EC2NodeClass) and a one-pod Deployment on it, and returns its NodeClaim
// once initialized, with the others that are.
//
// The control answers a question a fixed sleep cannot: has the controller
// had its chance? The nodeclaim controller that sets Consolidatable and
// Drifted works through its NodeClaims one at a time, in the order their
// changes reach it; when it has acted on a change to the control made after
// a change to the NodeClaim under test, it has weighed that one too.
func withControl(t *testing.T, poolYAML string, others int) v1.NodeClaim {
	t.Helper()
	framework.Kubectl(t, strings.ReplaceAll(poolYAML, "name: default}", "name: control}"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("ctl", 1, "500m", "512Mi", "      nodeSelector: {karpenter.sh/nodepool: control}\n"), "apply", "-f", "-")
	for _, nc := range framework.Initialized(t, others+1) {
		if nc.Labels[v1.LabelNodePool] == "control" {
			return nc
		}
	}
	t.Fatal("no NodeClaim from the control NodePool")
	return v1.NodeClaim{}
}

// conditionOf is the named NodeClaim's condition ("Status/Reason",
// "absent"), or "gone" when there is no such NodeClaim.
func conditionOf(t *testing.T, name, cond string) string {
	for _, nc := range framework.NodeClaims(t) {
		if nc.Name == name {
			return framework.Condition(nc, cond)
		}
	}
	return "gone"
}

// waitCondition waits for the NodeClaim's condition to read want.
func waitCondition(t *testing.T, name, cond, want string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, cond+" "+want+" on "+name, func() (bool, string) {
		got := conditionOf(t, name, cond)
		return got == want, got
	})
}

// TestConsolidatable checks that a NodeClaim quiet for consolidateAfter
// becomes Consolidatable, and that one under consolidateAfter: Never does
// not, although it initialized first and has been quiet for longer.
func TestConsolidatable(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolWith("Never", "720h"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 2, "500m", "512Mi", ""), "apply", "-f", "-")
	never := framework.Initialized(t, 1)[0]
	quiet := withControl(t, framework.PoolWith("2s", "720h"), 1)
	waitCondition(t, quiet.Name, v1.ConditionTypeConsolidatable, "True/Consolidatable")
	if got := conditionOf(t, never.Name, v1.ConditionTypeConsolidatable); got != "absent" {
		t.Fatalf("under consolidateAfter: Never, Consolidatable %s", got)
	}
}

func TestDrift(t *testing.T) {
	framework.StartJoiner(t)
	cases := []struct {
		name   string
		change string // a merge patch of the NodePool
		class  string // a merge patch of the EC2NodeClass
		want   string
	}{
		{name: "the EC2NodeClass changes", class: `{"spec":{"tags":{"team":"payments"}}}`, want: "True/NodeClassDrift"},
		{name: "a selector term change is not static drift", class: `{"spec":{"subnetSelectorTerms":[{"tags":{"karpenter.sh/discovery":"other"}}]}}`, want: "absent"},
		{name: "template labels change", change: `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`, want: "True/NodePoolDrifted"},
		{name: "taints change", change: `{"spec":{"template":{"spec":{"taints":[{"key":"dedicated","effect":"NoSchedule"}]}}}}`, want: "True/NodePoolDrifted"},
		{name: "requirements the node no longer meets", change: `{"spec":{"template":{"spec":{"requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]}]}}}}`, want: "True/RequirementsDrifted"},
		{name: "a limit change is not drift", change: `{"spec":{"limits":{"cpu":"100"}}}`, want: "absent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { framework.ResetCluster(t) })
			framework.Kubectl(t, framework.PoolWith("Never", "720h"), "apply", "-f", "-")
			framework.Kubectl(t, framework.Deployment("web", 1, "500m", "512Mi", ""), "apply", "-f", "-")
			nc := framework.Initialized(t, 1)[0]
			var ctl v1.NodeClaim
			if tc.want == "absent" {
				ctl = withControl(t, framework.PoolWith("Never", "720h"), 1)
			}
			if tc.class != "" {
				framework.Kubectl(t, "", "patch", "ec2nodeclass", "default", "--type=merge", "-p", tc.class)
			} else {
				framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", tc.change)
			}
			if tc.want != "absent" {
				waitCondition(t, nc.Name, v1.ConditionTypeDrifted, tc.want)
				return
			}
			// The same kind of change, one that drifts, made to the control
			// after the change under test: once the control has drifted,
			// the change under test has been weighed.
			if tc.class != "" {
				framework.Kubectl(t, "", "patch", "ec2nodeclass", "control", "--type=merge", "-p", `{"spec":{"tags":{"team":"payments"}}}`)
				waitCondition(t, ctl.Name, v1.ConditionTypeDrifted, "True/NodeClassDrift")
			} else {
				framework.Kubectl(t, "", "patch", "nodepool", "control", "--type=merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`)
				waitCondition(t, ctl.Name, v1.ConditionTypeDrifted, "True/NodePoolDrifted")
			}
			if got := conditionOf(t, nc.Name, v1.ConditionTypeDrifted); got != "absent" {
				t.Fatalf("Drifted %s", got)
			}
		})
	}
}

func TestExpiration(t *testing.T) {
	j := framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolWith("Never", "20s"), "apply", "-f", "-")
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

// TestExpirationPastDoNotDisrupt expires a node whose pod has
// do-not-disrupt: expiration is forceful, so the node goes anyway, but the
// pod is only deleted when terminationGracePeriod ends.
func TestExpirationPastDoNotDisrupt(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	p := strings.Replace(framework.PoolWith("Never", "20s"), "      expireAfter:", "      terminationGracePeriod: 20s\n      expireAfter:", 1)
	framework.Kubectl(t, p, "apply", "-f", "-")
	framework.Kubectl(t, doNotDisrupt(framework.Deployment("web", 1, "500m", "512Mi", "      terminationGracePeriodSeconds: 0\n")), "apply", "-f", "-")
	first := framework.Initialized(t, 1)[0]
	var deleting time.Time
	framework.Eventually(t, time.Minute, "the NodeClaim expired", func() (bool, string) {
		for _, nc := range framework.NodeClaims(t) {
			if nc.Name == first.Name && nc.DeletionTimestamp != nil {
				deleting = nc.DeletionTimestamp.Time
				return true, ""
			}
		}
		return false, "not deleting"
	})
	framework.Eventually(t, 2*time.Minute, "the expired NodeClaim gone at its terminationGracePeriod", func() (bool, string) {
		return !exists(t, first.Name), "still there"
	})
	// The pod held the node until the deadline, 20s after deletion began.
	if held := time.Since(deleting); held < 15*time.Second {
		t.Errorf("the node went %s after expiring; its do-not-disrupt pod should have held it for the 20s terminationGracePeriod", held.Round(time.Second))
	}
	out := framework.Kubectl(t, "", "get", "events", "-A", "--field-selector", "reason=TerminationGracePeriodExpiring,involvedObject.name="+first.Name, "-o", "custom-columns=MSG:.message", "--no-headers")
	if !strings.Contains(out, "terminationGracePeriod ends at") {
		t.Errorf("no TerminationGracePeriodExpiring event: %q", out)
	}
}

// TestExpiredNodeGetsOneReplacement is Karpenter's regression spec
// "should replace expired node with a single node and schedule all pods",
// which Joiner first failed: five pods behind a PDB that lets one go at a
// time leave an expired node, and they get one node between them, planned
// as soon as the node began to go, not one per eviction.
func TestExpiredNodeGetsOneReplacement(t *testing.T) {
	j := framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolWith("Never", "30s"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 5, "500m", "512Mi", "")+`---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 4
  selector: {matchLabels: {app: web}}
`, "apply", "-f", "-")
	first := framework.Initialized(t, 1)[0]
	// The replacement must not expire in turn.
	framework.Kubectl(t, "", "patch", "nodepool", "default", "--type=merge", "-p", `{"spec":{"template":{"spec":{"expireAfter":"Never"}}}}`)
	seen := map[string]bool{first.Name: true}
	framework.Eventually(t, 3*time.Minute, "the expired node gone and the five pods on its one replacement", func() (bool, string) {
		claims := framework.NodeClaims(t)
		gone := true
		for _, nc := range claims {
			seen[nc.Name] = true
			gone = gone && nc.Name != first.Name
		}
		n, nodes := framework.Running(t, map[string]string{"app": "web"})
		return gone && n == 5 && len(claims) == 1, fmt.Sprintf("%d running on %v, %d nodeclaims", n, nodes, len(claims))
	})
	// The first NodeClaim the provisioner's, the replacement the
	// disruption loop's (an expired node is replaced before it drains).
	if n := j.Count("created nodeclaim") + strings.Count(j.Logs(), "and replacing with"); len(seen) != 2 || n != 2 {
		t.Errorf("%d nodeclaims seen, %d created, want the expired one and one replacement", len(seen), n)
	}
}
