package disruption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func withTGP(tgp string) string {
	p := framework.PoolWith("Never", "720h")
	if tgp == "" {
		return p
	}
	return strings.Replace(p, "      expireAfter:", "      terminationGracePeriod: "+tgp+"\n      expireAfter:", 1)
}

func exists(t testing.TB, name string) bool {
	for _, nc := range framework.NodeClaims(t) {
		if nc.Name == name {
			return true
		}
	}
	return false
}

// witness is a pod that nothing protects, run beside the pod under test:
// when the drain has evicted it, the drain has had its chance at the other.
const witness = `---
apiVersion: v1
kind: Pod
metadata: {name: witness, labels: {app: witness}}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
`

// TestDrain deletes a NodeClaim whose pod resists eviction and checks that
// the drain waits for it, and that terminationGracePeriod ends the wait.
func TestDrain(t *testing.T) {
	framework.StartJoiner(t, "DISRUPTION_POLL=2s")
	cases := []struct {
		name, tgp, workload string
		// wantGone: the node must go (forced at the deadline); otherwise it
		// must stay while the drain goes on.
		wantGone bool
	}{
		{name: "a PDB allowing no eviction holds the drain", workload: framework.Deployment("web", 1, "500m", "512Mi", "      terminationGracePeriodSeconds: 0\n") + pdb("maxUnavailable: 0")},
		{name: "terminationGracePeriod forces the drain past the PDB", tgp: "10s", wantGone: true, workload: framework.Deployment("web", 1, "500m", "512Mi", "      terminationGracePeriodSeconds: 0\n") + pdb("maxUnavailable: 0")},
		{name: "do-not-disrupt holds the drain", workload: doNotDisrupt(framework.Deployment("web", 1, "500m", "512Mi", "      terminationGracePeriodSeconds: 0\n"))},
		{name: "terminationGracePeriod forces the drain past do-not-disrupt", tgp: "10s", wantGone: true, workload: doNotDisrupt(framework.Deployment("web", 1, "500m", "512Mi", "      terminationGracePeriodSeconds: 0\n"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { framework.ResetCluster(t) })
			framework.Kubectl(t, withTGP(tc.tgp), "apply", "-f", "-")
			// Pods are deleted at the deadline less their own grace period;
			// with none, exactly at the deadline.
			framework.Kubectl(t, tc.workload+witness, "apply", "-f", "-")
			nc := framework.Initialized(t, 1)[0]
			framework.Eventually(t, time.Minute, "the pod and the witness running on the node", func() (bool, string) {
				n, nodes := framework.Running(t, map[string]string{"app": "web"})
				w, _ := framework.Running(t, map[string]string{"app": "witness"})
				return n == 1 && w == 1 && nodes[nc.Status.NodeName] == 1, fmt.Sprintf("%d on %v, witness %d", n, nodes, w)
			})
			framework.Kubectl(t, "", "delete", "nodeclaim", nc.Name, "--wait=false")
			framework.WaitForEvent(t, time.Minute, "Evicted", "witness", "")
			if !tc.wantGone {
				if !exists(t, nc.Name) {
					t.Fatalf("the node went although its pod may not be evicted")
				}
				if evicted := webEvictions(t); len(evicted) > 0 {
					t.Fatalf("the drain evicted %v", evicted)
				}
				var pods corev1.PodList
				if err := framework.Kube.List(context.Background(), &pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil {
					t.Fatal(err)
				}
				for _, p := range pods.Items {
					if p.DeletionTimestamp != nil || p.Spec.NodeName != nc.Status.NodeName {
						t.Fatalf("pod %s on %q is going although it may not be evicted", p.Name, p.Spec.NodeName)
					}
				}
				return
			}
			framework.Eventually(t, time.Minute, "the drain forced at the deadline", func() (bool, string) {
				return !exists(t, nc.Name), "still there"
			})
			// The pod went by deletion at the deadline, never by eviction.
			out := framework.Events(t, "TerminationGracePeriodExpiring", nc.Name)
			if len(out) == 0 || !strings.Contains(out[0], "terminationGracePeriod ends at") {
				t.Errorf("no TerminationGracePeriodExpiring event: %v", out)
			}
			if evicted := webEvictions(t); len(evicted) > 0 {
				t.Errorf("the drain evicted %v before the deadline", evicted)
			}
		})
	}
}

// webEvictions names the app=web pods that were evicted.
func webEvictions(t *testing.T) []string {
	var events corev1.EventList
	if err := framework.Kube.List(context.Background(), &events, client.InNamespace("default"), client.MatchingFields{"reason": "Evicted"}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, "web-") {
			out = append(out, e.InvolvedObject.Name)
		}
	}
	return out
}

// TestPDBHonouredThroughoutDrain drains a node whose four pods allow one
// eviction at a time and checks the budget is never overrun.
func TestPDBHonouredThroughoutDrain(t *testing.T) {
	framework.StartJoiner(t, "DISRUPTION_POLL=2s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolWith("Never", "720h"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 4, "250m", "256Mi", "")+pdb("maxUnavailable: 1"), "apply", "-f", "-")
	nc := framework.Initialized(t, 1)[0]
	framework.Eventually(t, time.Minute, "4 pods running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "web"})
		return n == 4, fmt.Sprint(n)
	})
	framework.Kubectl(t, "", "delete", "nodeclaim", nc.Name, "--wait=false")
	deadline := time.Now().Add(3 * time.Minute)
	minHealthy := 4
	for exists(t, nc.Name) && time.Now().Before(deadline) {
		var p policyv1.PodDisruptionBudget
		if err := framework.Kube.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "web"}, &p); err == nil && p.Status.ObservedGeneration > 0 {
			if int(p.Status.CurrentHealthy) < minHealthy {
				minHealthy = int(p.Status.CurrentHealthy)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if exists(t, nc.Name) {
		t.Fatalf("the drain did not finish")
	}
	if minHealthy < 3 {
		t.Fatalf("the PDB allows 1 unavailable, but only %d of 4 pods were healthy during the drain", minHealthy)
	}
	framework.Eventually(t, time.Minute, "all 4 pods running again", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "web"})
		return n == 4, fmt.Sprint(n)
	})
}

func pdb(spec string) string {
	return "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec:\n  " + spec + "\n  selector: {matchLabels: {app: web}}\n"
}

func doNotDisrupt(deployment string) string {
	return strings.Replace(deployment, "metadata: {labels: {app: web}}", "metadata: {labels: {app: web}, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}", 1)
}
