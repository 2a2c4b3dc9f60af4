//go:build chaos

package aws

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
)

// chaosFaults are the failures of every AWS call during the chaos run:
// more than test/aws's faults test injects, with EC2's eventual
// consistency and latency on top.
// A launch loses its answer more often than other calls, as a launch is
// what a lost answer can duplicate.
var chaosFaults = fakeaws.Faults{
	ThrottleRate: 0.15, ErrorRate: 0.05, LostRate: 0.05,
	Actions:       map[string]fakeaws.ActionFaults{"ec2:CreateFleet": {LostRate: ptr.To(0.3)}},
	DescribeDelay: fakeaws.Duration{Duration: 2 * time.Second},
	Latency:       fakeaws.Duration{Duration: 10 * time.Millisecond},
	Seed:          7,
}

// TestChaos (make chaos) runs guide 03's workload up and down for
// CHAOS_ROUNDS rounds (default 4) while every AWS call risks throttling, a
// 5xx before or after it took effect, 10 ms of latency and 2 s of
// DescribeInstances lag; in the second round Joiner is killed (SIGKILL)
// as soon as the scale-up's first NodeClaim exists, and started again.
// Every scale-up must run all its pods, every scale-down must come back to
// at most two nodes, every NodeClaim must end initialized, an instance no
// NodeClaim claimed may come only from the round of the kill, and once the
// faults stop no instance may run without a NodeClaim: what the kill left
// behind, garbage collection must end. The figures (time
// per phase, faults, launches, instances no NodeClaim claimed) are logged
// for docs/long-tests.md.
func TestChaos(t *testing.T) {
	rounds := 4
	if v := os.Getenv("CHAOS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("CHAOS_ROUNDS=%q: want a whole number of at least 2 (the second round kills Joiner)", v)
		}
		rounds = n
	}
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	if err := fake.SetFaults(chaosFaults); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.SetFaults(fakeaws.Faults{}) })
	claims := watchClaims(t)
	env := awsEnv("GARBAGE_COLLECT_INTERVAL=5s")
	joiner := framework.StartJoiner(t, env...)
	t.Cleanup(func() {
		_ = fake.SetFaults(fakeaws.Faults{})
		framework.ResetCluster(t)
	})

	// Guide 03 on small types, with a 10 s consolidateAfter, so
	// scale-down shows.
	manifest := guide03OnSmallTypes(t, "10s", 5)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	framework.Eventually(t, 4*time.Minute, "the 5 pods of the guide to run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 5, fmt.Sprintf("%d running", n)
	})

	var figures []string
	roundStart := make([]time.Time, rounds+1)
	for round := 1; round <= rounds; round++ {
		start := time.Now()
		roundStart[round] = start
		before := len(framework.NodeClaims(t))
		framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "30")
		killed := ""
		if round == 2 {
			framework.Eventually(t, 2*time.Minute, "the scale-up's first NodeClaim", func() (bool, string) {
				n := len(framework.NodeClaims(t))
				return n > before, fmt.Sprintf("%d NodeClaims, %d before", n, before)
			})
			joiner.Stop(syscall.SIGKILL)
			joiner = framework.StartJoiner(t, env...)
			// Cleanups run last first: the cluster is reset while this
			// Joiner still runs its finalizers.
			t.Cleanup(func() {
				_ = fake.SetFaults(fakeaws.Faults{})
				framework.ResetCluster(t)
			})
			killed = ", Joiner killed mid-launch and restarted"
		}
		framework.Eventually(t, 6*time.Minute, fmt.Sprintf("round %d: 30 pods to run", round), func() (bool, string) {
			n, _ := framework.Running(t, map[string]string{"app": "inflate"})
			return n == 30, fmt.Sprintf("%d running, %d NodeClaims", n, len(framework.NodeClaims(t)))
		})
		up := time.Since(start)
		peak := len(framework.NodeClaims(t))

		start = time.Now()
		framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "3")
		framework.Eventually(t, 8*time.Minute, fmt.Sprintf("round %d: consolidation back to at most 2 nodes", round), func() (bool, string) {
			n, _ := framework.Running(t, map[string]string{"app": "inflate"})
			ncs := framework.NodeClaims(t)
			for _, nc := range ncs {
				if nc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
					return false, fmt.Sprintf("NodeClaim %s deleting or not initialized; %d running", nc.Name, n)
				}
			}
			return n == 3 && len(ncs) <= 2, fmt.Sprintf("%d running, %d NodeClaims", n, len(ncs))
		})
		down := time.Since(start)
		figures = append(figures, fmt.Sprintf("round %d: 30 pods running after %s on %d NodeClaims; back to %d after %s%s",
			round, up.Round(time.Second), peak, len(framework.NodeClaims(t)), down.Round(time.Second), killed))
	}

	// The faults stop; what a lost answer or the kill launched for no
	// NodeClaim must be collected.
	if err := fake.SetFaults(fakeaws.Faults{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "no instance running without a NodeClaim", func() (bool, string) {
		stray := strayInstances(t)
		return len(stray) == 0, fmt.Sprintf("%v", stray)
	})

	faulted := map[string]int{}
	calls := fake.Calls("", "")
	var launched []string
	launchedBy := map[string]string{} // instance -> the call, for the figures
	launchRound := map[string]int{}
	lostLaunches := 0
	for _, c := range calls {
		if c.Fault != "" {
			faulted[c.Fault]++
		}
	}
	for _, c := range launchCalls() {
		launched = append(launched, c.Instances...)
		if c.Fault == "lost" && len(c.Instances) > 0 {
			lostLaunches++
		}
		round := 0
		for r := 1; r <= rounds; r++ {
			if !c.Time.Before(roundStart[r]) {
				round = r
			}
		}
		for _, id := range c.Instances {
			launchedBy[id] = fmt.Sprintf("%s in round %d (fault %q, client token %v)", id, round, c.Fault, c.Params["ClientToken"])
			launchRound[id] = round
		}
	}
	owner := map[string]string{}
	for name, pid := range claims.providerIDs(t) {
		if pid != "" {
			owner[instanceID(pid)] = name
		}
	}
	var unclaimed []string
	seen := map[string]bool{}
	for _, id := range launched {
		if seen[id] {
			t.Errorf("instance %s reported launched twice", id)
		}
		seen[id] = true
		if owner[id] == "" {
			unclaimed = append(unclaimed, launchedBy[id])
			// Only the kill may lose what a launch was for: lost answers
			// alone are settled with the call's client token.
			if launchRound[id] != 2 {
				t.Errorf("instance %s was launched for no NodeClaim outside the round Joiner was killed in", launchedBy[id])
			}
		}
	}
	for _, f := range figures {
		t.Log(f)
	}
	t.Logf("%d AWS calls, faults %v; %d NodeClaims created, %d instances launched (%d by a call whose answer was lost), %d never claimed by a NodeClaim and collected: %v",
		len(calls), faulted, len(claims.providerIDs(t)), len(launched), lostLaunches, len(unclaimed), unclaimed)
	if faulted["lost"] == 0 || faulted["error"] == 0 || faulted["throttle"] == 0 || lostLaunches == 0 {
		t.Errorf("faults %v, %d launches whose answer was lost: every kind must have fired, on a launch too, for the run to mean anything", faulted, lostLaunches)
	}
}
