package capacityreservation

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

type fakeEC2 struct {
	reservations []ec2types.CapacityReservation
	asked        []*ec2.DescribeCapacityReservationsInput
}

func (f *fakeEC2) DescribeCapacityReservations(_ context.Context, in *ec2.DescribeCapacityReservationsInput, _ ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error) {
	f.asked = append(f.asked, in)
	var out []ec2types.CapacityReservation
	for _, r := range f.reservations {
		if len(in.CapacityReservationIds) > 0 && aws.ToString(r.CapacityReservationId) != in.CapacityReservationIds[0] {
			continue
		}
		out = append(out, r)
	}
	return &ec2.DescribeCapacityReservationsOutput{CapacityReservations: out}, nil
}

func reservation(id string, available int32, state ec2types.CapacityReservationState, kind ec2types.CapacityReservationType) ec2types.CapacityReservation {
	return ec2types.CapacityReservation{CapacityReservationId: aws.String(id), InstanceType: aws.String("m5.large"), AvailabilityZone: aws.String("us-east-1a"),
		OwnerId: aws.String("123456789012"), AvailableInstanceCount: aws.Int32(available), State: state, ReservationType: kind,
		InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted}
}

// A Capacity Block takes no launches from 40 minutes before its end, and
// says "expiring" then; any other reservation until its end.
func TestExpiring(t *testing.T) {
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	endAt := metav1.NewTime(end)
	block := awsv1.CapacityReservation{ID: "cr-block", ReservationType: "capacity-block", EndTime: &endAt}
	odcr := awsv1.CapacityReservation{ID: "cr-1", ReservationType: "default", EndTime: &endAt}
	open := awsv1.CapacityReservation{ID: "cr-2", ReservationType: "default"}
	for _, tc := range []struct {
		r    awsv1.CapacityReservation
		at   time.Duration // before the end
		want bool
	}{
		{block, 41 * time.Minute, false}, {block, 40 * time.Minute, true}, {block, time.Minute, true}, {block, -time.Minute, true},
		{odcr, 40 * time.Minute, false}, {odcr, time.Second, false}, {odcr, 0, true},
		{open, 0, false},
	} {
		if got := Expiring(tc.r, end.Add(-tc.at)); got != tc.want {
			t.Errorf("%s (%s) %s before its end: Expiring = %v, want %v", tc.r.ID, tc.r.ReservationType, tc.at, got, tc.want)
		}
	}
	f := &fakeEC2{reservations: []ec2types.CapacityReservation{reservation("cr-block", 4, ec2types.CapacityReservationStateActive, ec2types.CapacityReservationTypeCapacityBlock)}}
	f.reservations[0].EndDate = &end
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{CapacityReservationSelectorTerms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-block"}}}}
	for at, want := range map[time.Duration]string{time.Hour: "active", 39 * time.Minute: "expiring"} {
		got, err := NewProvider(f, clocktesting.NewFakePassiveClock(end.Add(-at))).List(context.Background(), nc)
		if err != nil || len(got) != 1 || got[0].State != want {
			t.Errorf("%s before the block's end: %+v, %v; want state %q", at, got, err, want)
		}
	}
}

func TestList(t *testing.T) {
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	block := reservation("cr-block", 4, ec2types.CapacityReservationStateActive, ec2types.CapacityReservationTypeCapacityBlock)
	block.EndDate = &end
	f := &fakeEC2{reservations: []ec2types.CapacityReservation{
		reservation("cr-1", 2, ec2types.CapacityReservationStateActive, ""),
		reservation("cr-gone", 2, ec2types.CapacityReservationStateCancelled, ""),
		block,
	}}
	p := NewProvider(f, clocktesting.NewFakePassiveClock(time.Now()))
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{CapacityReservationSelectorTerms: []awsv1.CapacityReservationSelectorTerm{
		{ID: "cr-1"}, {Tags: map[string]string{"team": "ml"}, OwnerID: "123456789012", InstanceMatchCriteria: "targeted"}}}}
	got, err := p.List(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "cr-1" || got[1].ID != "cr-block" {
		t.Fatalf("listed %+v; want the two active reservations", got)
	}
	if got[0].ReservationType != "default" || got[1].ReservationType != "capacity-block" || got[1].EndTime == nil || !got[1].EndTime.Equal(&metav1.Time{Time: end}) {
		t.Fatalf("reservation fields %+v", got)
	}
	second := f.asked[1]
	filters := map[string]string{}
	for _, fl := range second.Filters {
		filters[aws.ToString(fl.Name)] = fl.Values[0]
	}
	if filters["tag:team"] != "ml" || filters["owner-id"] != "123456789012" || filters["instance-match-criteria"] != "targeted" || filters["state"] != "active" {
		t.Fatalf("the second term asked with filters %v", filters)
	}
	// Room: what EC2 said, less Joiner's launches, until the next refresh.
	if p.Available("cr-1") != 2 {
		t.Fatalf("available %d, want 2", p.Available("cr-1"))
	}
	p.Launched("cr-1")
	if p.Available("cr-1") != 1 {
		t.Fatalf("after a launch, available %d, want 1", p.Available("cr-1"))
	}
	p.Exhausted("cr-1")
	if p.Available("cr-1") != 0 || p.Available("cr-unknown") != 0 {
		t.Fatal("an exhausted or unknown reservation has room")
	}
	// A term that selects only a cancelled reservation is no error: the
	// class stays Ready with none, as in Karpenter.
	none := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{CapacityReservationSelectorTerms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-gone"}}}}
	if got, err := p.List(context.Background(), none); err != nil || got != nil {
		t.Fatalf("a term matching only a cancelled reservation: %v, %v; want none and no error", got, err)
	}
	if got, err := p.List(context.Background(), &awsv1.EC2NodeClass{}); err != nil || got != nil {
		t.Fatalf("a class without terms: %v, %v", got, err)
	}
}
