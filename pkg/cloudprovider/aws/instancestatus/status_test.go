package instancestatus

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

var since = time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)

// summary is a check's summary; each failed detail began failing a minute
// after the one before, from since.
func summary(status ec2types.SummaryStatus, failed ...ec2types.StatusName) *ec2types.InstanceStatusSummary {
	s := &ec2types.InstanceStatusSummary{Status: status}
	for i, f := range failed {
		at := since.Add(time.Duration(i) * time.Minute)
		s.Details = append(s.Details, ec2types.InstanceStatusDetails{Name: f, Status: ec2types.StatusTypeFailed, ImpairedSince: &at})
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
			[]Finding{{Category: CategoryInstance, Detail: "impaired: reachability failed", Since: since}}},
		{"impaired with no failed detail is not a failed check", ec2types.InstanceStatus{InstanceStatus: ok, SystemStatus: summary(ec2types.SummaryStatusImpaired)}, nil},
		{"two failed details: the earliest start", ec2types.InstanceStatus{InstanceStatus: ok, SystemStatus: summary(ec2types.SummaryStatusImpaired, "reachability", "clock")},
			[]Finding{{Category: CategorySystem, Detail: "impaired: clock, reachability failed", Since: since}}},
		{"a failed detail with no start", ec2types.InstanceStatus{InstanceStatus: &ec2types.InstanceStatusSummary{Status: ec2types.SummaryStatusImpaired,
			Details: []ec2types.InstanceStatusDetails{{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypeFailed}}}},
			[]Finding{{Category: CategoryInstance, Detail: "impaired: reachability failed"}}},
		{"both checks and an event, most severe first", ec2types.InstanceStatus{
			InstanceStatus: summary(ec2types.SummaryStatusImpaired, ec2types.StatusNameReachability),
			SystemStatus:   summary(ec2types.SummaryStatusImpaired, ec2types.StatusNameReachability),
			Events:         []ec2types.InstanceStatusEvent{{Code: ec2types.EventCodeInstanceRetirement, Description: aws.String("The instance is running on degraded hardware"), NotBefore: &start}},
		}, []Finding{
			{Category: CategorySystem, Detail: "impaired: reachability failed", Since: since},
			{Category: CategoryInstance, Detail: "impaired: reachability failed", Since: since},
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

// pages answers DescribeInstanceStatus as EC2 does: the filters applied
// (different names ANDed), in pages of one instance each.
type pages struct {
	statuses []ec2types.InstanceStatus
	// unfiltered counts the calls that asked for every instance.
	unfiltered int
}

func (p *pages) DescribeInstanceStatus(_ context.Context, in *ec2.DescribeInstanceStatusInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	if len(in.Filters) == 0 {
		p.unfiltered++
	}
	var match []ec2types.InstanceStatus
	for _, st := range p.statuses {
		if passes(st, in.Filters) {
			match = append(match, st)
		}
	}
	i := 0
	if in.NextToken != nil {
		fmt.Sscan(*in.NextToken, &i)
	}
	out := &ec2.DescribeInstanceStatusOutput{}
	if i < len(match) {
		out.InstanceStatuses = match[i : i+1]
	}
	if i+1 < len(match) {
		out.NextToken = aws.String(fmt.Sprint(i + 1))
	}
	return out, nil
}

func passes(st ec2types.InstanceStatus, filters []ec2types.Filter) bool {
	for _, f := range filters {
		var have []string
		switch aws.ToString(f.Name) {
		case "instance-status.status":
			have = []string{string(st.InstanceStatus.Status)}
		case "system-status.status":
			have = []string{string(st.SystemStatus.Status)}
		case "event.code":
			for _, e := range st.Events {
				have = append(have, string(e.Code))
			}
		default:
			panic("filter " + aws.ToString(f.Name))
		}
		if !slices.ContainsFunc(have, func(h string) bool { return slices.Contains(f.Values, h) }) {
			return false
		}
	}
	return true
}

// Unhealthy asks for failed checks and events only, reads every page, and
// lists an instance found by two questions once.
func TestUnhealthyAsksForTheUnhealthy(t *testing.T) {
	p := &pages{}
	ok := summary(ec2types.SummaryStatusOk)
	bad := summary(ec2types.SummaryStatusImpaired, ec2types.StatusNameReachability)
	retire := []ec2types.InstanceStatusEvent{{Code: ec2types.EventCodeInstanceRetirement}}
	for i, st := range []ec2types.InstanceStatus{
		{InstanceStatus: bad, SystemStatus: ok},
		{InstanceStatus: ok, SystemStatus: ok},
		{InstanceStatus: bad, SystemStatus: bad, Events: retire},
		{InstanceStatus: ok, SystemStatus: ok, Events: retire},
	} {
		st.InstanceId = aws.String(fmt.Sprintf("i-%d", i))
		p.statuses = append(p.statuses, st)
	}
	got, err := Unhealthy(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range got {
		keys = append(keys, f.InstanceID+"/"+string(f.Category))
	}
	want := []string{"i-0/instance_status", "i-2/system_status", "i-2/instance_status", "i-2/event_status", "i-3/event_status"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("Unhealthy = %v, want %v", keys, want)
	}
	if p.unfiltered > 0 {
		t.Errorf("%d calls read every instance in the region", p.unfiltered)
	}
}

// A failed check is due once it has failed for two minutes; an event at
// once.
func TestDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		f    Finding
		want bool
	}{
		{Finding{Category: CategorySystem, Since: now}, false},
		{Finding{Category: CategoryInstance, Since: now.Add(-119 * time.Second)}, false},
		{Finding{Category: CategoryInstance, Since: now.Add(-120 * time.Second)}, true},
		{Finding{Category: CategorySystem}, true},
		{Finding{Category: CategoryEvent}, true},
	} {
		if got := tc.f.Due(now); got != tc.want {
			t.Errorf("%s failing since %s: Due = %v, want %v", tc.f.Category, tc.f.Since, got, tc.want)
		}
	}
}
