package aws

import (
	"context"
	"testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/capacityreservation"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	corev1 "k8s.io/api/core/v1"
)

// A reserved node whose instance runs in a reservation its class no
// longer selects is drifted, as in Karpenter; the recent description that
// says so is confirmed by a fresh one.
func TestCapacityReservationDrift(t *testing.T) {
	const id = "i-0123456789abcdef0"
	selecting := func(ids ...string) *awsv1.EC2NodeClass {
		return readyClass(func(nc *awsv1.EC2NodeClass) {
			for _, r := range ids {
				nc.Status.CapacityReservations = append(nc.Status.CapacityReservations, awsv1.CapacityReservation{ID: r, InstanceType: "m5.large", AvailabilityZone: zoneA})
			}
		})
	}
	in := func(reservation string) *instance.Instance {
		return &instance.Instance{ID: id, Type: "m5.large", Zone: zoneA, ImageID: amiAMD, SubnetID: "subnet-a", SecurityGroupIDs: []string{"sg-1", "sg-2"}, CapacityReservationID: reservation}
	}
	cases := []struct {
		name         string
		class        *awsv1.EC2NodeClass
		capacityType string
		recent       *instance.Instance
		fresh        *instance.Instance // nil: as recent
		want         string
	}{
		{name: "in a reservation the class selects", class: selecting("cr-1"), capacityType: v1.CapacityTypeReserved, recent: in("cr-1")},
		{name: "in a reservation the class no longer selects", class: selecting("cr-2"), capacityType: v1.CapacityTypeReserved, recent: in("cr-1"), want: ReasonCapacityReservationDrift},
		{name: "the class selects none any more", class: selecting(), capacityType: v1.CapacityTypeReserved, recent: in("cr-1"), want: ReasonCapacityReservationDrift},
		{name: "the reservation let the instance go (a fresh description)", class: selecting(), capacityType: v1.CapacityTypeReserved, recent: in("cr-1"), fresh: in("")},
		{name: "an on-demand node EC2 put into an open reservation", class: selecting(), capacityType: v1.CapacityTypeOnDemand, recent: in("cr-open")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			insts := &fakeInstances{described: map[string]*instance.Instance{id: tc.recent}}
			if tc.fresh != nil {
				insts.fresh = map[string]*instance.Instance{id: tc.fresh}
			}
			p := newProvider(t, kubeWith(t, tc.class), &fakes{instances: insts})
			claim := nodeClaim()
			claim.Labels[corev1.LabelInstanceTypeStable] = "m5.large"
			claim.Labels[v1.LabelCapacityType] = tc.capacityType
			if tc.capacityType == v1.CapacityTypeReserved {
				claim.Labels[capacityreservation.LabelID] = tc.recent.CapacityReservationID
			}
			claim.Annotations = map[string]string{awsv1.AnnotationEC2NodeClassHash: tc.class.Hash(), awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
			claim.Status.ProviderID = "aws:///us-east-1a/" + id
			claim.Status.ImageID = amiAMD
			got, err := p.IsDrifted(context.Background(), claim)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("IsDrifted = %q, want %q", got, tc.want)
			}
		})
	}
}
