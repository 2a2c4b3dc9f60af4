package aws

import (
	"fmt"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/api/meta"
)

// TestFaultsEveryPodPlacedNoDoubleLaunch is the guide's scale-up with a
// fifth of every AWS call throttled and one in twenty failing with a 5xx,
// from Joiner's start: half of those 5xx before the call reaches the
// backend, half after it acted (the answer lost on the way back, which
// only a retry with the call's client token survives without launching
// twice). Until one launch has failed as a whole, every CreateFleet
// launches and loses its answer, so the NodeClaims' own retries after a
// failed launch are exercised whatever the draws. Every pod still runs,
// each NodeClaim ever created got exactly one instance (a retried call or
// a retried launch that launched again would show as an instance too
// many, launched for no NodeClaim), and at the end no running instance is
// without a NodeClaim.
func TestFaultsEveryPodPlacedNoDoubleLaunch(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	// Seed 1551's first three draws are a 5xx, a throttle and a lost
	// answer, so each kind fires after the switch below however few calls
	// are left by then.
	faults := fakeaws.Faults{ThrottleRate: 0.2, ErrorRate: 0.025, LostRate: 0.025, Seed: 1551}
	// Until one launch has failed as a whole (every attempt the SDK makes),
	// every CreateFleet launches and its answer is lost.
	first := faults
	always, never := 1.0, 0.0
	first.Actions = map[string]fakeaws.ActionFaults{"ec2:CreateFleet": {LostRate: &always, ErrorRate: &never, ThrottleRate: &never}}
	if err := fake.SetFaults(first); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.SetFaults(fakeaws.Faults{}) })
	claims := watchClaims(t)
	framework.StartJoiner(t, awsEnv()...)
	// Before Joiner stops: its finalizers must run for the cluster to empty.
	t.Cleanup(func() {
		_ = fake.SetFaults(fakeaws.Faults{})
		framework.ResetCluster(t)
	})

	// Guide 03 with 30 replicas on small types; no consolidation, so
	// every NodeClaim is the provisioner's.
	manifest := guide03OnSmallTypes(t, "Never", 30)
	framework.Kubectl(t, manifest, "apply", "-f", "-")

	framework.Eventually(t, 2*time.Minute, "a launch to fail", func() (bool, string) {
		for _, nc := range framework.NodeClaims(t) {
			if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched); c != nil && c.Reason == "LaunchFailed" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d CreateFleet calls", len(fake.Calls("ec2", "CreateFleet")))
	})
	if err := fake.SetFaults(faults); err != nil {
		t.Fatal(err)
	}
	mixed := len(fake.Calls("", ""))
	framework.Eventually(t, 4*time.Minute, "30 inflate pods run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 30, fmt.Sprintf("%d running, %d NodeClaims", n, len(framework.NodeClaims(t)))
	})
	current := framework.NodeClaims(t)
	if len(current) < 2 {
		t.Fatalf("%d NodeClaims for 30 pods of 1 CPU on types of at most 8 vCPUs, want several", len(current))
	}
	// A node can run pods before the lifecycle controller, its calls
	// throttled too, marks its NodeClaim: each is initialized in the end.
	framework.Eventually(t, time.Minute, "every NodeClaim initialized", func() (bool, string) {
		for _, nc := range framework.NodeClaims(t) {
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				return false, fmt.Sprintf("NodeClaim %s runs pods but is not initialized: %s", nc.Name, framework.Condition(nc, v1.ConditionTypeInitialized))
			}
		}
		return true, ""
	})
	// The faults did fire, on the launch path too.
	var throttled, failed, lost int
	faulted := map[string]int{}
	for _, c := range fake.Calls("", "")[mixed:] {
		switch c.Fault {
		case "throttle":
			throttled++
		case "error":
			failed++
		case "lost":
			lost++
		}
		if c.Fault != "" {
			faulted[c.Service+":"+c.Action]++
		}
	}
	if throttled == 0 || failed == 0 || lost == 0 {
		t.Fatalf("%d throttled, %d failed and %d lost calls under the mixed faults: they were not injected", throttled, failed, lost)
	}
	lostLaunches := 0
	for _, c := range fake.Calls("ec2", "CreateFleet") {
		if c.Fault == "lost" && len(c.Instances) > 0 {
			lostLaunches++
		}
		t.Logf("CreateFleet token %v: fault %q, replayed %v, launched %v", c.Params["ClientToken"], c.Fault, c.Replayed, c.Instances)
	}
	if lostLaunches == 0 {
		t.Fatal("no CreateFleet launched and lost its answer: the test proves nothing of retries after one")
	}
	if err := fake.SetFaults(fakeaws.Faults{}); err != nil {
		t.Fatal(err)
	}

	// Every launched instance belongs to exactly one NodeClaim ever
	// created, and every NodeClaim to exactly one instance.
	var launched []string
	for _, c := range launchCalls() {
		launched = append(launched, c.Instances...)
	}
	ever := claims.providerIDs(t)
	owner := map[string]string{}
	for name, pid := range ever {
		if pid == "" {
			t.Errorf("NodeClaim %s never launched", name)
			continue
		}
		owner[instanceID(pid)] = name
	}
	seen := map[string]bool{}
	for _, id := range launched {
		if seen[id] {
			t.Errorf("instance %s reported launched twice", id)
		}
		seen[id] = true
		if owner[id] == "" {
			t.Errorf("instance %s was launched for no NodeClaim", id)
		}
	}
	if len(launched) != len(ever) {
		t.Errorf("%d instances launched (%v) for %d NodeClaims ever created (%v)", len(launched), launched, len(ever), ever)
	}
	t.Logf("%d NodeClaims, %d instances; %d launches whose answer was lost; under the mixed faults %d throttled, %d failed and %d lost calls of %d: %v",
		len(ever), len(launched), lostLaunches, throttled, failed, lost, len(fake.Calls("", ""))-mixed, faulted)

	// No running instance is without a NodeClaim.
	for _, stray := range strayInstances(t) {
		t.Errorf("instance %s without a NodeClaim", stray)
	}
}
