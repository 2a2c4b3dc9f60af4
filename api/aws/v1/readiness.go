package v1

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of an EC2NodeClass, as Karpenter names them.
const (
	ConditionTypeReady                = "Ready"
	ConditionTypeAMIsReady            = "AMIsReady"
	ConditionTypeInstanceProfileReady = "InstanceProfileReady"
	ConditionTypeSecurityGroupsReady  = "SecurityGroupsReady"
	ConditionTypeSubnetsReady         = "SubnetsReady"
	ConditionTypeValidationSucceeded  = "ValidationSucceeded"
	ConditionTypePlacementGroupReady  = "PlacementGroupReady"
	// ConditionTypeCapacityReservationsReady is always a Ready dependent:
	// with the ReservedCapacity gate off it is True, the terms unresolved.
	ConditionTypeCapacityReservationsReady = "CapacityReservationsReady"
)

// TerminationFinalizer holds a deleted EC2NodeClass until no NodeClaim
// uses it and the AWS resources made for it (instance profile, launch
// templates) are gone.
const TerminationFinalizer = Group + "/termination"

// Reasons of the Ready condition when it is not True, as Karpenter's
// status library writes them.
const (
	ReasonUnhealthyDependents   = "UnhealthyDependents"
	ReasonReconcilingDependents = "ReconcilingDependents"
	ReasonNodeClassTerminating  = "NodeClassTerminating"
)

// ReadyDependents are the conditions Ready is the conjunction of, in the
// order Ready's message names them.
var ReadyDependents = []string{
	ConditionTypeAMIsReady,
	ConditionTypeInstanceProfileReady,
	ConditionTypeSecurityGroupsReady,
	ConditionTypeSubnetsReady,
	ConditionTypeValidationSucceeded,
	ConditionTypePlacementGroupReady,
	ConditionTypeCapacityReservationsReady,
}

// Readiness decides whether the class can launch nodes. It is the one
// place that decides: the controllers that write status store its answer
// as the Ready condition, and everything that asks whether a class is
// usable (NodePool status, provisioning) calls it rather than reading
// conditions itself.
//
// A class being deleted is not ready. Otherwise Ready is True when every
// dependent condition is True for the current generation; False, with
// reason UnhealthyDependents, when one is False; and Unknown, with reason
// ReconcilingDependents, while one is Unknown, missing or written for an
// older generation (the spec changed and the controller has not caught up).
// The message lists the dependents that are not True, as "SubnetsReady=False,
// AMIsReady=Unknown". Their own messages say why.
//
// A status that has only a Ready condition and no dependent (written by
// something other than Joiner's controllers) is taken as it is.
func (in *EC2NodeClass) Readiness() (status metav1.ConditionStatus, reason, message string) {
	if in.DeletionTimestamp != nil {
		return metav1.ConditionFalse, ReasonNodeClassTerminating, fmt.Sprintf("EC2NodeClass %q is terminating", in.Name)
	}
	var unhealthy []string
	anyFalse, anyDependent := false, false
	for _, t := range ReadyDependents {
		c := findCondition(in.Status.Conditions, t)
		switch {
		case c == nil:
			unhealthy = append(unhealthy, t+"="+string(metav1.ConditionUnknown))
		case c.ObservedGeneration < in.Generation:
			anyDependent = true
			unhealthy = append(unhealthy, t+"="+string(metav1.ConditionUnknown))
		case c.Status != metav1.ConditionTrue:
			anyDependent = true
			anyFalse = anyFalse || c.Status == metav1.ConditionFalse
			unhealthy = append(unhealthy, t+"="+string(c.Status))
		default:
			anyDependent = true
		}
	}
	if !anyDependent {
		if c := findCondition(in.Status.Conditions, ConditionTypeReady); c != nil {
			return c.Status, c.Reason, c.Message
		}
	}
	switch {
	case len(unhealthy) == 0:
		return metav1.ConditionTrue, ConditionTypeReady, ""
	case anyFalse:
		return metav1.ConditionFalse, ReasonUnhealthyDependents, strings.Join(unhealthy, ", ")
	default:
		return metav1.ConditionUnknown, ReasonReconcilingDependents, strings.Join(unhealthy, ", ")
	}
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
