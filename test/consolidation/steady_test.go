package consolidation

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
)

// TestSteadyState scales a mixed workload up and down, waits until
// consolidation has nothing left to do, and then checks that a steady
// workload brings no disruption at all: no NodeClaim created or deleted, no
// decision logged, no pod pending. A plan that kube-scheduler cannot follow,
// or savings too small to be real, would show up here as a replace loop.
//
// How long it watches is steadyWatch. In the default suite (make test) that
// is 3 minutes at a 1 s decision interval: 180 decisions over the converged
// cluster, as many as Karpenter makes in 30 minutes at its 10 s. It covers
// what a decision does with a state that does not change: a replace loop,
// a plan that strands pods, a decision that flips between two plans, the
// provisioner's 10 s resync finding work that is not there. It does not
// cover what only time brings: the nodeclaim controller's 5-minute drift
// re-check, the 10-minute window in which a stranded pod counts against a
// risky consolidation, replacements that time out after 10 minutes, or slow
// leaks (events, memory) that a longer run would show. Those are what the
// full 30-minute watch is for; it runs under the long build tag, outside
// make test:
//
//	make soak
//
// (go test -tags long -run TestSteadyState ./test/consolidation/), and
// docs/long-tests.md keeps its figures.
func TestSteadyState(t *testing.T) {
	j := framework.StartJoiner(t, "DISRUPTION_POLL=1s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	mixed(t, "steady", "5s", 12)
	running := func(want int) (bool, string) { return mixedRunning(t, "steady", want) }
	framework.Eventually(t, 3*time.Minute, "48 pods running", func() (bool, string) { return running(48) })
	scaleMixed(t, "steady", 5)

	// Converged: the same NodeClaims, none deleting, for a minute.
	fingerprint := func() string {
		var names []string
		for _, nc := range framework.NodeClaims(t) {
			s := nc.Name + "/" + nc.Labels[corev1.LabelInstanceTypeStable]
			if nc.DeletionTimestamp != nil {
				s += "(deleting)"
			}
			names = append(names, s)
		}
		sort.Strings(names)
		return strings.Join(names, " ")
	}
	last, since := "", time.Now()
	start := time.Now()
	framework.Eventually(t, 10*time.Minute, "consolidation to settle", func() (bool, string) {
		if ok, state := running(20); !ok {
			last = ""
			return false, state
		}
		fp := fingerprint()
		if fp != last || strings.Contains(fp, "deleting") {
			last, since = fp, time.Now()
		}
		return time.Since(since) >= time.Minute, fp
	})
	decisions := strings.Count(j.Logs(), "disrupting nodeclaim(s)")
	t.Logf("settled after %s on %s, %d decisions", time.Since(start).Round(time.Second), last, decisions)

	watch := steadyWatch
	deadline := time.Now().Add(watch)
	for time.Now().Before(deadline) {
		if fp := fingerprint(); fp != last {
			t.Fatalf("disruption in steady state after %s: NodeClaims went from %s to %s", time.Since(deadline.Add(-watch)).Round(time.Second), last, fp)
		}
		if ok, state := running(20); !ok {
			t.Fatalf("in steady state: %s", state)
		}
		// The watch samples the cluster every 5 s; the decision count in
		// the log below catches anything that came and went in between.
		time.Sleep(5 * time.Second)
	}
	if n := strings.Count(j.Logs(), "disrupting nodeclaim(s)"); n != decisions {
		t.Fatalf("%d disruption decisions logged during %s of steady state", n-decisions, watch)
	}
	t.Logf("%s of steady state: no NodeClaim created or deleted, no decision logged", watch)
}
