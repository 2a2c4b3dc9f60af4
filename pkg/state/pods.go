// Package state reads the cluster as the scheduling core needs it: pending
// pods, nodes with their pods, in-flight NodeClaims and DaemonSets.
package state

import (
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaimCondition returns the status of a NodeClaim condition.
func NodeClaimCondition(nc *v1.NodeClaim, t string) metav1.ConditionStatus {
	for _, c := range nc.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}
