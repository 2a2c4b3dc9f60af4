package nodeclass

import (
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A class with reservation terms is read every minute, and when its next
// reservation starts expiring; one without, at the resync.
func TestReservationsRequeue(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	terms := []awsv1.CapacityReservationSelectorTerm{{ID: "cr-1"}}
	for _, tc := range []struct {
		name  string
		terms []awsv1.CapacityReservationSelectorTerm
		crs   []awsv1.CapacityReservation
		want  time.Duration
	}{
		{"no terms", nil, nil, 5 * time.Minute},
		{"terms, nothing ending soon", terms, []awsv1.CapacityReservation{{ID: "cr-1", ReservationType: "default", EndTime: at(time.Hour)}}, time.Minute},
		{"a block starting to expire in 30 s", terms, []awsv1.CapacityReservation{{ID: "cr-1", ReservationType: "capacity-block", EndTime: at(40*time.Minute + 30*time.Second)}}, 30 * time.Second},
		{"a reservation ending in 20 s", terms, []awsv1.CapacityReservation{{ID: "cr-1", ReservationType: "default", EndTime: at(20 * time.Second)}}, 20 * time.Second},
		{"a block already expiring", terms, []awsv1.CapacityReservation{{ID: "cr-1", ReservationType: "capacity-block", EndTime: at(10 * time.Minute)}}, time.Minute},
	} {
		nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{CapacityReservationSelectorTerms: tc.terms}}
		nc.Status.CapacityReservations = tc.crs
		if got := reservationsRequeue(nc, now, 5*time.Minute); got != tc.want {
			t.Errorf("%s: requeue after %s, want %s", tc.name, got, tc.want)
		}
	}
}
