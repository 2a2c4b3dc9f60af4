package launchtemplate

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// A launch into a reservation targets it alone (capacity-reservations-only),
// a Capacity Block and an interruptible reservation under their market
// types; with the ReservedCapacity gate on, any other launch opts out of
// open reservations; off, it is left as EC2 places it (Karpenter's
// targeted and open launch modes).
func TestReservationSpecification(t *testing.T) {
	motoEC2 := reset(t)
	p := New(motoEC2, "demo", nil, 0)
	cases := []struct {
		name       string
		edit       func(*Input)
		preference ec2types.CapacityReservationPreference
		target     string
		market     ec2types.MarketType
	}{
		{name: "the gate off, no reservation: no specification", edit: func(*Input) {}},
		{name: "the gate on, no reservation: out of open ones", edit: func(in *Input) { in.ReservationsTargeted = true },
			preference: ec2types.CapacityReservationPreferenceNone},
		{name: "a reservation", edit: func(in *Input) { in.ReservationsTargeted, in.CapacityReservationID = true, "cr-1" },
			preference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly, target: "cr-1"},
		{name: "a Capacity Block", edit: func(in *Input) {
			in.ReservationsTargeted, in.CapacityReservationID, in.CapacityBlock = true, "cr-2", true
		}, preference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly, target: "cr-2", market: ec2types.MarketTypeCapacityBlock},
		{name: "an interruptible reservation", edit: func(in *Input) {
			in.ReservationsTargeted, in.CapacityReservationID, in.Interruptible = true, "cr-3", true
		}, preference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly, target: "cr-3", market: ec2types.MarketTypeInterruptibleCapacityReservation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := input()
			tc.edit(&in)
			_, d := ensureAndRead(t, p, motoEC2, in)
			var preference ec2types.CapacityReservationPreference
			target := ""
			if s := d.CapacityReservationSpecification; s != nil {
				preference = s.CapacityReservationPreference
				if s.CapacityReservationTarget != nil {
					target = aws.ToString(s.CapacityReservationTarget.CapacityReservationId)
				}
			}
			var market ec2types.MarketType
			if d.InstanceMarketOptions != nil {
				market = d.InstanceMarketOptions.MarketType
			}
			if preference != tc.preference || target != tc.target || market != tc.market {
				t.Errorf("preference %q, target %q, market %q; want %q, %q, %q", preference, target, market, tc.preference, tc.target, tc.market)
			}
		})
	}
}
