package aws

import (
	"context"
	"fmt"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

// UnsupportedError names an EC2NodeClass field that Karpenter v1.14.1's
// schema has and Joiner cannot honour yet. Such a class fails
// ValidationSucceeded, so it launches nothing, rather than launch nodes
// that quietly lack what the field asked for.
type UnsupportedError struct {
	Field string
	Why   string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s is not supported by Joiner yet: %s; remove it from the EC2NodeClass (docs/karpenter-parity.md lists what is supported)", e.Field, e.Why)
}

// Reason is the ValidationSucceeded reason.
func (e *UnsupportedError) Reason() string { return "UnsupportedField" }

// Unsupported is the EC2NodeClass validator that refuses those fields.
func Unsupported(_ context.Context, nc *awsv1.EC2NodeClass) error {
	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
		return &UnsupportedError{Field: "spec.capacityReservationSelectorTerms",
			Why: "Joiner does not launch into capacity reservations, so the reservations would be paid for beside the on-demand instances launched instead"}
	}
	return nil
}
