package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deny refuses the actions as IAM would, and nothing else.
func deny(t testing.TB, actions ...string) {
	t.Helper()
	if err := fake.SetFaults(fakeaws.Faults{AccessDenied: actions}); err != nil {
		t.Fatal(err)
	}
}

// waitErrorLog waits for an error-level line of the Joiner's log with the
// message whose error names fragment, and returns the line.
func waitErrorLog(t testing.TB, j *framework.Joiner, message, fragment string) string {
	t.Helper()
	var found string
	framework.Eventually(t, time.Minute, fmt.Sprintf("an error log %q saying %q", message, fragment), func() (bool, string) {
		var last string
		for _, line := range strings.Split(j.Logs(), "\n") {
			if !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, `"message":"`+message+`"`) {
				continue
			}
			if strings.Contains(line, fragment) {
				found = line
				return true, ""
			}
			last = line
		}
		return false, last
	})
	return found
}

// waitPodEvent waits for a FailedScheduling event of a pod of app that says
// fragment.
func waitPodEvent(t testing.TB, app, fragment string) string {
	t.Helper()
	var found string
	framework.Eventually(t, time.Minute, "a FailedScheduling event saying "+fragment, func() (bool, string) {
		var events corev1.EventList
		if err := framework.Kube.List(context.Background(), &events, client.InNamespace("default"), client.MatchingFields{"reason": "FailedScheduling"}); err != nil {
			return false, err.Error()
		}
		var last string
		for _, e := range events.Items {
			if !strings.HasPrefix(e.InvolvedObject.Name, app+"-") {
				continue
			}
			if strings.Contains(e.Message, fragment) {
				found = e.Message
				return true, ""
			}
			last = e.Message
		}
		return false, last
	})
	return found
}

// launches counts the instances CreateFleet launched since the call log
// was reset.
func launches() int {
	n := 0
	for _, c := range fake.Calls("ec2", "CreateFleet") {
		n += len(c.Instances)
	}
	return n
}

// waitAllowed waits for a call of the action that went through, after a
// denial was lifted.
func waitAllowed(t testing.TB, service, action string) {
	t.Helper()
	framework.Eventually(t, time.Minute, fmt.Sprintf("a successful %s:%s call", service, action), func() (bool, string) {
		calls := fake.Calls(service, action)
		for _, c := range calls {
			if c.Status == 200 && c.Fault == "" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d calls", len(calls))
	})
}

// TestDeniedAtStart starts one Joiner with the calls it makes once and
// caches refused as by IAM: the instance types and their offerings, which
// every launch needs, and the on-demand and spot prices, for which the
// embedded catalog stands in. The denials are lifted one at a time, in the
// order Joiner makes the calls, so each step shows which action it names.
//
// What a Karpenter user expects: without instance types nothing launches,
// the log says so at error level and the waiting pods' events name the
// action to allow; without prices Joiner launches on the catalog's prices
// and its log names the action. Each recovers on a later refresh, with no
// restart.
func TestDeniedAtStart(t *testing.T) {
	framework.ResetCluster(t)
	explainBoots(t, fake)
	fake.ResetCalls()
	deny(t, "ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings", "pricing:GetProducts", "ec2:DescribeSpotPriceHistory")
	j := framework.StartJoiner(t, awsEnv("JOINER_TEST_PRICE_RETRY=2s")...)
	// Before Joiner stops: its finalizers must run for the cluster to
	// empty, and with the faults gone, so the instance can terminate.
	t.Cleanup(func() { framework.ResetCluster(t) })
	t.Cleanup(func() { deny(t) })
	framework.Kubectl(t, badClass{}.manifest("denied-start"), "apply", "-f", "-")
	framework.Kubectl(t, badPool("denied-start"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("waiting", 1, "1", "1Gi", ""), "apply", "-f", "-")

	// The prices: refused, named, and the catalog's in use.
	for _, tc := range []struct{ prices, action string }{{"on-demand", "pricing:GetProducts"}, {"spot", "ec2:DescribeSpotPriceHistory"}} {
		line := waitErrorLog(t, j, "prices not refreshed; keeping the last good ones", "allow "+tc.action+" in the IAM policy")
		if !strings.Contains(line, `"prices":"`+tc.prices+`"`) {
			t.Errorf("the line naming %s is not about the %s prices: %s", tc.action, tc.prices, line)
		}
	}

	for _, tc := range []struct {
		action string
		still  []string // denied while the step waits
	}{
		{"ec2:DescribeInstanceTypes", []string{"ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings", "pricing:GetProducts", "ec2:DescribeSpotPriceHistory"}},
		{"ec2:DescribeInstanceTypeOfferings", []string{"ec2:DescribeInstanceTypeOfferings", "pricing:GetProducts", "ec2:DescribeSpotPriceHistory"}},
	} {
		deny(t, tc.still...)
		// New pods: a fresh event budget, and a batch at once.
		replacePods(t, "waiting")
		fix := "allow " + tc.action + " in the IAM policy"
		waitErrorLog(t, j, "skipping nodepool, unable to resolve instance types", fix)
		t.Logf("event: %s", waitPodEvent(t, "waiting", fix))
		framework.WantClaims(t, 0)
		if n := len(fake.Calls("ec2", "CreateFleet")); n > 0 {
			t.Fatalf("%d CreateFleet calls while %s is denied", n, tc.action)
		}
	}

	// Instance types allowed, prices still refused: the pod runs on a node
	// launched at the catalog's prices, once.
	deny(t, "pricing:GetProducts", "ec2:DescribeSpotPriceHistory")
	framework.Eventually(t, 2*time.Minute, "the pod running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "waiting"})
		return n == 1, fmt.Sprintf("%d running, %d NodeClaims", n, len(framework.NodeClaims(t)))
	})
	if n := launches(); n != 1 {
		t.Errorf("%d instances launched for one pod", n)
	}
	if line := waitErrorLog(t, j, "prices not refreshed; keeping the last good ones", "pricing:GetProducts"); !strings.Contains(line, `"OnDemandSource":"catalog"`) {
		t.Errorf("the prices in use are not the catalog's: %s", line)
	}

	// Allowed: the next refresh, not a restart, fetches the prices.
	fake.ResetCalls()
	deny(t)
	waitAllowed(t, "pricing", "GetProducts")
	waitAllowed(t, "ec2", "DescribeSpotPriceHistory")
}
