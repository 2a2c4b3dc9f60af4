package aws

import (
	"fmt"
	"math/rand"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
)

// TestShortChaos is make test's share of the chaos: Kubernetes faults on
// top of AWS's. Guide 03 on small types goes up and down while Joiner is
// killed five times at random moments (a fixed seed) across the launch, the
// replacement and the drain of a node whose kubelet died, and while a burst
// of API writes fails (conflicts on Node patches, 5xx on NodeClaim status
// writes). An observer of events and instances checks at the end:
//   - every instance has a NodeClaim, and every NodeClaim an instance;
//   - the Deployment has its replicas Running;
//   - pods left only through the Eviction API, which holds the PDB, except
//     on the node repair forced off its dead kubelet;
//   - no pod was evicted more than twice.
//
// make chaos runs the long version (test/aws/chaos_test.go).
func TestShortChaos(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	rnd := rand.New(rand.NewSource(18))
	proxy := framework.StartAPIFaults(t, 18)
	env := append(awsEnv("FEATURE_GATES=NodeRepair=true", "JOINER_TEST_REPAIR_TOLERATION=10s", "GARBAGE_COLLECT_INTERVAL=5s"), proxy.Env())
	joiner := framework.StartJoiner(t, env...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	kills := 0
	kill := func(when string) {
		time.Sleep(time.Duration(500+rnd.Intn(4000)) * time.Millisecond) // a random moment of the phase
		joiner.Stop(syscall.SIGKILL)
		joiner = framework.StartJoiner(t, env...)
		t.Cleanup(func() { framework.ResetCluster(t) }) // while this one runs its finalizers
		kills++
		t.Logf("kill %d: %s", kills, when)
	}
	running := func(n int, what string) {
		framework.Eventually(t, 5*time.Minute, what, func() (bool, string) {
			got, byNode := framework.Running(t, map[string]string{"app": "inflate"})
			return got == n, fmt.Sprintf("%d running %v, %d NodeClaims; failed writes %d", got, byNode, len(framework.NodeClaims(t)), len(proxy.Failed()))
		})
	}

	// The burst: while the cluster scales up.
	proxy.Set(
		framework.APIFault{Method: http.MethodPatch, Resource: "nodeclaims", Subresource: "status", Status: http.StatusInternalServerError, Rate: 0.3, Times: 20},
		framework.APIFault{Method: http.MethodPatch, Resource: "nodes", Status: http.StatusConflict, Rate: 0.3, Times: 20},
	)
	manifest := guide03OnSmallTypes(t, "10s", 12) + `---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: inflate}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: inflate}}
`
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	kill("launch")
	kill("launch, again")
	running(12, "12 pods to run after the launches")
	burst := len(proxy.Failed())
	proxy.Set()

	// A kubelet dies: node repair forces its node off.
	claims := framework.NodeClaims(t)
	dead := claims[rnd.Intn(len(claims))]
	if _, err := fake.KillKubelet(t.Context(), instanceID(dead.Status.ProviderID)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "the dead kubelet's node to be repaired", func() (bool, string) {
		return joiner.Count("deleting unhealthy node") > 0, "not yet"
	})
	kill("drain of the repaired node")
	running(12, "12 pods to run after the repair")

	// Scale down: consolidation replaces and deletes.
	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "3")
	kill("replace")
	kill("replace, again")
	framework.Eventually(t, 6*time.Minute, "back to at most two nodes", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		ncs := framework.NodeClaims(t)
		return n == 3 && len(ncs) <= 2, fmt.Sprintf("%d running, %d NodeClaims", n, len(ncs))
	})

	// Every instance has a NodeClaim, and every NodeClaim an instance.
	waitOneToOne(t)
	// Pods were removed directly (not evicted) only on the repaired node.
	for _, ev := range eventsOn(t, "TerminationGracePeriodExpiring") {
		if ev.InvolvedObject.Name != dead.Name {
			t.Errorf("a pod deleted past its PDB on %s, not the repaired %s: %s", ev.InvolvedObject.Name, dead.Name, ev.Message)
		}
	}
	evictions := map[string]int{}
	for _, ev := range eventsOn(t, "Evicted") {
		evictions[ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name] += int(max(ev.Count, 1))
	}
	for pod, n := range evictions {
		if n > 2 {
			t.Errorf("pod %s evicted %d times", pod, n)
		}
	}
	t.Logf("%d kills; %d API writes failed in the burst; kubelet of %s killed and repaired; %d pods evicted; %d CreateFleet calls",
		kills, burst, dead.Status.NodeName, len(evictions), len(fake.Calls("ec2", "CreateFleet")))
}

// eventsOn are the cluster's events of a reason.
func eventsOn(t testing.TB, reason string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := framework.Kube.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}
