package aws

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/util/rand"
)

// TestLeaderFailover runs two replicas on one Lease, as the chart does, and
// kills the leader with SIGKILL right after it created the NodeClaim of a
// scale-up, before that NodeClaim launched. The standby takes the Lease
// once it expires, launches the NodeClaim (its client token is the
// NodeClaim's, so a fleet call the dead leader made is answered again, not
// repeated), and the scale-up completes with one instance per NodeClaim.
func TestLeaderFailover(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	env := awsEnv("DISABLE_LEADER_ELECTION=false", "SYSTEM_NAMESPACE=default", "LEADER_ELECTION_NAME=joiner-failover-"+rand.String(5))
	leader := framework.StartJoiner(t, env...)
	framework.Eventually(t, time.Minute, "the first replica leads", func() (bool, string) {
		return leader.Count("Successfully acquired lease") == 1, "not yet"
	})
	standby := framework.StartJoiner(t, env...)
	framework.Eventually(t, time.Minute, "the second replica waits for the Lease", func() (bool, string) {
		return standby.Count("Attempting to acquire leader lease...") == 1, "not yet"
	})
	t.Cleanup(func() { framework.ResetCluster(t) })

	framework.Kubectl(t, guide03OnSmallTypes(t, "1m", 12), "apply", "-f", "-")
	framework.Eventually(t, time.Minute, "the leader creates the scale-up's NodeClaims", func() (bool, string) {
		return leader.Count("created nodeclaim") > 0, "not yet"
	})
	leader.Stop(syscall.SIGKILL)
	killed := time.Now()
	framework.Eventually(t, time.Minute, "the standby takes the Lease", func() (bool, string) {
		return standby.Count("Successfully acquired lease") == 1, "not yet"
	})
	t.Logf("the standby led %s after the leader was killed", time.Since(killed).Round(100*time.Millisecond))

	framework.Eventually(t, 4*time.Minute, "twelve inflate pods run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 12, fmt.Sprintf("%d running", n)
	})
	claims := framework.NodeClaims(t)
	launched := map[string]bool{}
	for _, c := range launchCalls() {
		for _, id := range c.Instances {
			launched[id] = true
		}
	}
	if len(launched) != len(claims) {
		ids := make([]string, 0, len(launched))
		for id := range launched {
			ids = append(ids, id)
		}
		t.Errorf("%d instances launched for %d NodeClaims: %s", len(launched), len(claims), strings.Join(ids, " "))
	}
	if stray := strayInstances(t); len(stray) > 0 {
		t.Errorf("instances without a NodeClaim: %v", stray)
	}
}
