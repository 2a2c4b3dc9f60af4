package fakeaws_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
)

// A status set through the admin route is what both clients read from
// DescribeInstanceStatus; the other instances keep moto's answer.
func TestInstanceStatusOverride(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	run := must(c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId:      aws.String(imageID(t, "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")),
		InstanceType: "m5.large", MinCount: aws.Int32(2), MaxCount: aws.Int32(2), SubnetId: aws.String(subnetIn("us-east-1a")),
	}))(t)
	sick, well := aws.ToString(run.Instances[0].InstanceId), aws.ToString(run.Instances[1].InstanceId)
	t.Cleanup(func() {
		terminate(t, sick)
		terminate(t, well)
		admin(t, "PUT", "/_fake/instance-status", fakeaws.InstanceHealth{InstanceID: sick}, nil)
	})
	retire := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	if code := admin(t, "PUT", "/_fake/instance-status", fakeaws.InstanceHealth{InstanceID: sick, SystemStatus: "impaired",
		Events: []fakeaws.ScheduledEvent{{Code: "instance-retirement", Description: "degraded hardware", NotBefore: retire}}}, nil); code != http.StatusOK {
		t.Fatalf("PUT /_fake/instance-status: %d", code)
	}

	out := must(c.EC2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: []string{sick, well}}))(t)
	got := map[string]ec2types.InstanceStatus{}
	for _, s := range out.InstanceStatuses {
		got[aws.ToString(s.InstanceId)] = s
	}
	s := got[sick]
	if s.SystemStatus == nil || s.SystemStatus.Status != ec2types.SummaryStatusImpaired || s.InstanceStatus == nil || s.InstanceStatus.Status != ec2types.SummaryStatusOk {
		t.Errorf("the impaired instance reads %s", describe(s))
	}
	if len(s.SystemStatus.Details) == 0 || s.SystemStatus.Details[0].Status != ec2types.StatusTypeFailed {
		t.Errorf("the impaired check's details read %s, want failed", describe(s.SystemStatus))
	}
	if len(s.Events) != 1 || s.Events[0].Code != ec2types.EventCodeInstanceRetirement || s.Events[0].NotBefore == nil || !s.Events[0].NotBefore.Equal(retire) {
		t.Errorf("the instance's events read %s", describe(s.Events))
	}
	if w := got[well]; w.SystemStatus == nil || w.SystemStatus.Status != ec2types.SummaryStatusOk || len(w.Events) != 0 {
		t.Errorf("the other instance reads %s, want moto's ok", describe(w))
	}

	if d := s.SystemStatus.Details; len(d) == 0 || d[0].ImpairedSince == nil || time.Since(*d[0].ImpairedSince) > time.Minute || time.Since(*d[0].ImpairedSince) < -time.Minute {
		t.Errorf("the failed check's impairedSince reads %s, want about when it was set", describe(d))
	}

	// The filters Joiner and Karpenter ask with, which moto lacks: only
	// the impaired or scheduled instance answers each.
	for _, f := range []ec2types.Filter{
		{Name: aws.String("system-status.status"), Values: []string{"impaired"}},
		{Name: aws.String("event.code"), Values: []string{"instance-retirement", "instance-stop"}},
	} {
		out := must(c.EC2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{f}}))(t)
		var ids []string
		for _, s := range out.InstanceStatuses {
			ids = append(ids, aws.ToString(s.InstanceId))
		}
		if len(ids) != 1 || ids[0] != sick {
			t.Errorf("DescribeInstanceStatus filtered by %s=%v: %v, want only %s", aws.ToString(f.Name), f.Values, ids, sick)
		}
	}
	none := must(c.EC2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{{Name: aws.String("instance-status.status"), Values: []string{"impaired"}}}}))(t)
	if len(none.InstanceStatuses) != 0 {
		t.Errorf("filtered by instance-status.status=impaired: %s, want none", describe(none.InstanceStatuses))
	}
	if text := describe(awsCLI(t, "ec2", "describe-instance-status", "--filters", "Name=system-status.status,Values=impaired")); !strings.Contains(text, sick) || strings.Contains(text, well) {
		t.Errorf("aws ec2 describe-instance-status --filters Name=system-status.status,Values=impaired: %s", text)
	}

	// Set again, still impaired: the impairment goes on from when it began.
	since := *s.SystemStatus.Details[0].ImpairedSince
	if code := admin(t, "PUT", "/_fake/instance-status", fakeaws.InstanceHealth{InstanceID: sick, SystemStatus: "impaired", InstanceStatus: "impaired",
		Events: []fakeaws.ScheduledEvent{{Code: "instance-retirement", Description: "degraded hardware", NotBefore: retire}}}, nil); code != http.StatusOK {
		t.Fatalf("PUT /_fake/instance-status: %d", code)
	}
	again := must(c.EC2.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: []string{sick}}))(t)
	if d := again.InstanceStatuses[0].SystemStatus.Details; len(d) == 0 || d[0].ImpairedSince == nil || !d[0].ImpairedSince.Equal(since) {
		t.Errorf("set again, the check's impairedSince reads %s, want %s", describe(d), since)
	}

	cli := awsCLI(t, "ec2", "describe-instance-status", "--instance-ids", sick)
	if text := describe(cli); !strings.Contains(text, `"impaired"`) || !strings.Contains(text, `"instance-retirement"`) {
		t.Errorf("aws ec2 describe-instance-status: %s", text)
	}

	for _, bad := range []fakeaws.InstanceHealth{{InstanceID: "nope"}, {InstanceID: sick, SystemStatus: "broken"}, {InstanceID: sick, Events: []fakeaws.ScheduledEvent{{Code: "reboot"}}}} {
		if code := admin(t, "PUT", "/_fake/instance-status", bad, nil); code != http.StatusBadRequest {
			t.Errorf("PUT /_fake/instance-status %s: %d, want 400", describe(bad), code)
		}
	}
}
