package nodeclass_test

import (
	"testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

// With the ReservedCapacity gate off the controller has no reservation
// lister: a class's capacityReservationSelectorTerms are ignored, and the
// class is Ready with no reservations, so its pools launch as before.
func TestReservationTermsIgnoredWithTheGateOff(t *testing.T) {
	nc := guideClass()
	nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}
	e := newEnv(t, nc)
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	got := e.get()
	checkConditions(t, got, allTrue())
	if len(got.Status.CapacityReservations) != 0 {
		t.Errorf("status.capacityReservations %v, want none with the gate off", got.Status.CapacityReservations)
	}
}
