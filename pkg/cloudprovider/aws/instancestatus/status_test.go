package instancestatus

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func summary(status ec2types.SummaryStatus, failed ...ec2types.StatusName) *ec2types.InstanceStatusSummary {
	s := &ec2types.InstanceStatusSummary{Status: status}
	for _, f := range failed {
		s.Details = append(s.Details, ec2types.InstanceStatusDetails{Name: f, Status: ec2types.StatusTypeFailed})
	}
	return s
}

func TestClassify(t *testing.T) {
	start := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	ok := summary(ec2types.SummaryStatusOk)
	cases := []struct {
		name string
		in   ec2types.InstanceStatus
		want []Finding
	}{
		{"healthy", ec2types.InstanceStatus{InstanceStatus: ok, SystemStatus: ok}, nil},
		{"booting is not unhealthy", ec2types.InstanceStatus{InstanceStatus: summary(ec2types.SummaryStatusInitializing), SystemStatus: summary(ec2types.SummaryStatusInsufficientData)}, nil},
		{"no summaries at all", ec2types.InstanceStatus{}, nil},
		{"instance check failed", ec2types.InstanceStatus{InstanceStatus: summary(ec2types.SummaryStatusImpaired, ec2types.StatusNameReachability), SystemStatus: ok},
			[]Finding{{Category: CategoryInstance, Detail: "impaired: reachability failed"}}},
		{"system check failed, no details", ec2types.InstanceStatus{InstanceStatus: ok, SystemStatus: summary(ec2types.SummaryStatusImpaired)},
			[]Finding{{Category: CategorySystem, Detail: "impaired"}}},
		{"both checks and an event, most severe first", ec2types.InstanceStatus{
			InstanceStatus: summary(ec2types.SummaryStatusImpaired, ec2types.StatusNameReachability),
			SystemStatus:   summary(ec2types.SummaryStatusImpaired, ec2types.StatusNameReachability),
			Events:         []ec2types.InstanceStatusEvent{{Code: ec2types.EventCodeInstanceRetirement, Description: aws.String("The instance is running on degraded hardware"), NotBefore: &start}},
		}, []Finding{
			{Category: CategorySystem, Detail: "impaired: reachability failed"},
			{Category: CategoryInstance, Detail: "impaired: reachability failed"},
			{Category: CategoryEvent, Detail: "scheduled event instance-retirement (The instance is running on degraded hardware) not before 2026-12-01T03:00:00Z"},
		}},
		{"finished events are over", ec2types.InstanceStatus{InstanceStatus: ok, SystemStatus: ok, Events: []ec2types.InstanceStatusEvent{
			{Code: ec2types.EventCodeSystemReboot, Description: aws.String("[Completed] Scheduled reboot")},
			{Code: ec2types.EventCodeInstanceStop, Description: aws.String("[Canceled] Scheduled stop")},
		}}, nil},
		{"one pending event among finished ones", ec2types.InstanceStatus{Events: []ec2types.InstanceStatusEvent{
			{Code: ec2types.EventCodeSystemReboot, Description: aws.String("[Completed] Scheduled reboot")},
			{Code: ec2types.EventCodeSystemMaintenance},
		}}, []Finding{{Category: CategoryEvent, Detail: "scheduled event system-maintenance"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.InstanceId = aws.String("i-1")
			for i := range tc.want {
				tc.want[i].InstanceID = "i-1"
			}
			if got := Classify(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Classify = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestForceful(t *testing.T) {
	for c, want := range map[Category]bool{CategoryInstance: true, CategorySystem: true, CategoryEvent: false} {
		if c.Forceful() != want {
			t.Errorf("%s.Forceful() = %v, want %v", c, c.Forceful(), want)
		}
	}
}

// pages answers DescribeInstanceStatus in pages of one instance each.
type pages struct{ statuses []ec2types.InstanceStatus }

func (p *pages) DescribeInstanceStatus(_ context.Context, in *ec2.DescribeInstanceStatusInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	i := 0
	if in.NextToken != nil {
		fmt.Sscan(*in.NextToken, &i)
	}
	out := &ec2.DescribeInstanceStatusOutput{InstanceStatuses: p.statuses[i : i+1]}
	if i+1 < len(p.statuses) {
		out.NextToken = aws.String(fmt.Sprint(i + 1))
	}
	return out, nil
}

func TestUnhealthyReadsEveryPage(t *testing.T) {
	p := &pages{}
	for i := range 3 {
		st := ec2types.InstanceStatus{InstanceId: aws.String(fmt.Sprintf("i-%d", i)), SystemStatus: summary(ec2types.SummaryStatusOk), InstanceStatus: summary(ec2types.SummaryStatusOk)}
		if i != 1 {
			st.InstanceStatus = summary(ec2types.SummaryStatusImpaired)
		}
		p.statuses = append(p.statuses, st)
	}
	got, err := Unhealthy(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Finding{{"i-0", CategoryInstance, "impaired"}, {"i-2", CategoryInstance, "impaired"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Unhealthy = %+v, want %+v", got, want)
	}
}
