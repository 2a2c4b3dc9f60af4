package disruption

import (
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
)

// steadyFor is how long TestSteadyState watches a converged cluster. The
// suite uses 3 minutes at a 1 s decision interval: 180 decisions, as many as
// 30 minutes at Karpenter's 10 s. JOINER_STEADY_STATE=30m runs the
// acceptance's full half hour.
func steadyFor(t *testing.T) time.Duration {
	if v := os.Getenv("JOINER_STEADY_STATE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("JOINER_STEADY_STATE=%q: %v; use a Go duration such as 30m", v, err)
		}
		return d
	}
	return 3 * time.Minute
}

// TestSteadyState scales a mixed workload up and down, waits until
// consolidation has nothing left to do, and then checks that a steady
// workload brings no disruption at all: no NodeClaim created or deleted, no
// decision logged, no pod pending. A plan that kube-scheduler cannot follow,
// or savings too small to be real, would show up here as a replace loop.
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

	watch := steadyFor(t)
	deadline := time.Now().Add(watch)
	for time.Now().Before(deadline) {
		if fp := fingerprint(); fp != last {
			t.Fatalf("disruption in steady state after %s: NodeClaims went from %s to %s", time.Since(deadline.Add(-watch)).Round(time.Second), last, fp)
		}
		if ok, state := running(20); !ok {
			t.Fatalf("in steady state: %s", state)
		}
		time.Sleep(5 * time.Second)
	}
	if n := strings.Count(j.Logs(), "disrupting nodeclaim(s)"); n != decisions {
		t.Fatalf("%d disruption decisions logged during %s of steady state", n-decisions, watch)
	}
	t.Logf("%s of steady state: no NodeClaim created or deleted, no decision logged", watch)
}
