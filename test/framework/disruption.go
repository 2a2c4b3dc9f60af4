package framework

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// PoolWith is PoolAndClass with consolidateAfter and expireAfter set.
func PoolWith(consolidateAfter, expireAfter string) string {
	return strings.Replace(strings.Replace(PoolAndClass,
		"  template:\n", fmt.Sprintf("  disruption: {consolidateAfter: %s}\n  template:\n", consolidateAfter), 1),
		"      requirements:", "      expireAfter: "+expireAfter+"\n      requirements:", 1)
}

// Condition is a NodeClaim condition as status/reason, or "absent".
func Condition(nc v1.NodeClaim, t string) string {
	if c := meta.FindStatusCondition(nc.Status.Conditions, t); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return "absent"
}

// Initialized waits until exactly n NodeClaims exist and all are
// initialized, and returns them.
func Initialized(t testing.TB, n int) []v1.NodeClaim {
	t.Helper()
	var claims []v1.NodeClaim
	Eventually(t, 2*time.Minute, fmt.Sprintf("%d initialized NodeClaim(s)", n), func() (bool, string) {
		claims = NodeClaims(t)
		ready := 0
		for _, nc := range claims {
			if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				ready++
			}
		}
		return ready == n && len(claims) == n, fmt.Sprintf("%d of %d", ready, len(claims))
	})
	return claims
}

// Registered waits until at least one NodeClaim exists and every one
// names its Node, and returns them. A pod can run before its NodeClaim's
// status is written, since kwok readies the Node first, so a test that
// reads status.nodeName after seeing pods run waits here.
func Registered(t testing.TB) []v1.NodeClaim {
	t.Helper()
	var claims []v1.NodeClaim
	Eventually(t, time.Minute, "every NodeClaim names its Node", func() (bool, string) {
		claims = NodeClaims(t)
		named := 0
		for _, nc := range claims {
			if nc.Status.NodeName != "" {
				named++
			}
		}
		return len(claims) > 0 && named == len(claims), fmt.Sprintf("%d of %d", named, len(claims))
	})
	return claims
}
