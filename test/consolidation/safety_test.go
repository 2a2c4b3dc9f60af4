package consolidation

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/taints"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These tests take the order of events from the controller's log, which
// timestamps each line: what the log says happened before what.

// decidedAbout returns when a disruption decision naming node was logged.
func decidedAbout(lines []framework.LogLine, node string) time.Time {
	for _, l := range lines {
		if strings.HasPrefix(l.Message, "disrupting nodeclaim(s)") && strings.Contains(l.Message, " "+node+"/") {
			return l.Time
		}
	}
	return time.Time{}
}

// onePod returns the single pod of a deployment, once it exists.
func onePod(t *testing.T, app string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	framework.Eventually(t, time.Minute, "the pod of "+app, func() (bool, string) {
		var pods corev1.PodList
		if err := framework.Kube.List(context.Background(), &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		pod = pods.Items[0]
		return true, ""
	})
	return pod
}

// podEvicted reports whether the pod with this UID is gone or going.
func podEvicted(t *testing.T, p corev1.Pod) bool {
	var now corev1.Pod
	err := framework.Kube.Get(context.Background(), types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, &now)
	return err != nil || now.UID != p.UID || now.DeletionTimestamp != nil
}

func claimNamed(t *testing.T, name string) *v1.NodeClaim {
	for _, nc := range framework.NodeClaims(t) {
		if nc.Name == name {
			return &nc
		}
	}
	return nil
}

// TestPendingPodsKeepTheirCapacity: while a node launches for pending pods,
// consolidation does not count its room as free. Node A runs one pod, on
// the cheapest type that holds it; B launches for a pod that does not fit
// on A and leaves room for A's pod too. Counting B's room, A would be
// deleted and its pod evicted onto a machine that is not Ready; instead A
// says why it stays.
func TestPendingPodsKeepTheirCapacity(t *testing.T) {
	j := framework.StartJoiner(t, "DISRUPTION_POLL=2s", "KWOK_LAUNCH_DELAY=30s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolWith("5s", "720h"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("a", 1, "1", "1Gi", ""), "apply", "-f", "-")
	a := framework.Initialized(t, 1)[0]
	aPod := onePod(t, "a")
	// The loop has looked at A: it is the cheapest node for its pod.
	framework.Eventually(t, time.Minute, "A found right-sized", func() (bool, string) {
		out := framework.Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=DisruptionBlocked,involvedObject.name="+a.Name, "-o", "custom-columns=MSG:.message")
		return strings.Contains(out, "no cheaper replacement"), framework.TailLines(out, 2)
	})
	framework.Kubectl(t, framework.Deployment("p", 1, "2", "1Gi", ""), "apply", "-f", "-")
	var b v1.NodeClaim
	framework.Eventually(t, time.Minute, "B launching for the pending pod", func() (bool, string) {
		for _, nc := range framework.NodeClaims(t) {
			if nc.Name != a.Name {
				b = nc
				return true, ""
			}
		}
		return false, ""
	})
	framework.Eventually(t, time.Minute, "A kept because its pod would fit only on B, still launching", func() (bool, string) {
		out := framework.Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=DisruptionBlocked,involvedObject.name="+a.Name, "-o", "custom-columns=MSG:.message")
		return strings.Contains(out, disruption.WaitingForLaunchReason), framework.TailLines(out, 2)
	})
	if now := claimNamed(t, b.Name); now == nil || meta.IsStatusConditionTrue(now.Status.Conditions, v1.ConditionTypeInitialized) {
		t.Fatalf("B initialized before the decision could be observed; the test proves nothing")
	}
	if podEvicted(t, aPod) {
		t.Fatalf("A's pod was evicted while B was launching")
	}
	framework.Eventually(t, 2*time.Minute, "B initialized and the pending pod running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "p"})
		now := claimNamed(t, b.Name)
		return n == 1 && now != nil && meta.IsStatusConditionTrue(now.Status.Conditions, v1.ConditionTypeInitialized), fmt.Sprint(n)
	})
	lines := framework.ParseLogs(j.Logs())
	ready, decided := framework.FirstAbout(lines, "initialized nodeclaim", b.Name), decidedAbout(lines, a.Status.NodeName)
	if ready.IsZero() {
		t.Fatal("no log of B's initialization")
	}
	if !decided.IsZero() && decided.Before(ready) {
		t.Fatalf("A was disrupted at %v, before B was initialized at %v", decided, ready)
	}
}

// TestBusyClusterStillConsolidates: pods pending for longer than a batch,
// for capacity that is still launching, hold back only the capacity they
// need: an empty node elsewhere is removed before they bind.
func TestBusyClusterStillConsolidates(t *testing.T) {
	j := framework.StartJoiner(t, "DISRUPTION_POLL=2s", "KWOK_LAUNCH_DELAY=60s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolWith("15s", "720h"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("e", 1, "1", "1Gi", ""), "apply", "-f", "-")
	e := framework.Initialized(t, 1)[0]
	framework.Eventually(t, time.Minute, "e running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "e"})
		return n == 1, fmt.Sprint(n)
	})
	// E empties; pods that do not fit on it arrive and wait for a launch.
	framework.Kubectl(t, "", "scale", "deployment/e", "--replicas=0")
	framework.Kubectl(t, framework.Deployment("p", 3, "3", "1Gi", ""), "apply", "-f", "-")
	pendingSince := time.Now()
	// kwok launches one machine at a time, so E's termination may queue
	// behind the launches: the deletion is what disruption does.
	framework.Eventually(t, 2*time.Minute, "E deleted", func() (bool, string) {
		nc := claimNamed(t, e.Name)
		return nc == nil || nc.DeletionTimestamp != nil, ""
	})
	lines := framework.ParseLogs(j.Logs())
	decided := decidedAbout(lines, e.Status.NodeName)
	if decided.IsZero() {
		t.Fatal("no decision about E logged")
	}
	if waited := decided.Sub(pendingSince); waited < 10*time.Second {
		t.Fatalf("E went %s after the pods went pending; the test needs them pending longer than a batch", waited)
	}
	for _, nc := range framework.NodeClaims(t) {
		if nc.Name == e.Name {
			continue
		}
		if ready := framework.FirstAbout(lines, "initialized nodeclaim", nc.Name); !ready.IsZero() && ready.Before(decided) {
			t.Fatalf("capacity for the pending pods was initialized (%v) before E was removed (%v): they did not wait", ready, decided)
		}
	}
	framework.Eventually(t, 2*time.Minute, "the pending pods running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "p"})
		return n == 3, fmt.Sprint(n)
	})
}

// TestTaintBeforeReplacement: a candidate is tainted before its
// replacement launches, so a pod created meanwhile never lands on it and
// is not evicted into a plan sized without it.
func TestTaintBeforeReplacement(t *testing.T) {
	j := framework.StartJoiner(t, "DISRUPTION_POLL=2s", "KWOK_LAUNCH_DELAY=30s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifest := strings.Replace(framework.ReadSeed(t, "03-scale-up-down.yaml"), "consolidateAfter: 1m", "consolidateAfter: 5s", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	old := framework.Initialized(t, 1)[0]
	framework.Eventually(t, time.Minute, "inflate running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 5, fmt.Sprint(n)
	})
	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas=1")
	framework.Eventually(t, 2*time.Minute, "the decision to replace the node", func() (bool, string) {
		return !decidedAbout(framework.ParseLogs(j.Logs()), old.Status.NodeName).IsZero(), ""
	})
	framework.Eventually(t, 2*time.Minute, "the candidate tainted", func() (bool, string) {
		var node corev1.Node
		if err := framework.Kube.Get(context.Background(), types.NamespacedName{Name: old.Status.NodeName}, &node); err != nil {
			return false, err.Error()
		}
		return taints.Has(node.Spec.Taints, v1.DisruptedNoScheduleTaint), ""
	})
	for _, nc := range framework.NodeClaims(t) {
		if nc.Name != old.Name && meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			t.Fatalf("the candidate was tainted only once its replacement %s was initialized", nc.Name)
		}
	}
	// A pod arrives while the replacement launches; the old node has room.
	framework.Kubectl(t, framework.Deployment("late", 1, "1", "1Gi", ""), "apply", "-f", "-")
	var late corev1.Pod
	framework.Eventually(t, 3*time.Minute, "the late pod running", func() (bool, string) {
		late = onePod(t, "late")
		return late.Status.Phase == corev1.PodRunning, string(late.Status.Phase)
	})
	if late.Spec.NodeName == old.Status.NodeName {
		t.Fatalf("the late pod was placed on the node being replaced")
	}
	framework.Eventually(t, 3*time.Minute, "the old node gone and every pod running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		m, _ := framework.Running(t, map[string]string{"app": "late"})
		return claimNamed(t, old.Name) == nil && n == 1 && m == 1, fmt.Sprintf("inflate %d, late %d", n, m)
	})
	if podEvicted(t, late) {
		t.Fatalf("the late pod was evicted")
	}
}
