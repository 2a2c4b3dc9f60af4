package fakeaws_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
)

func TestInjectedErrorsAsTheSDKSeesThem(t *testing.T) {
	ctx := context.Background()
	c := fastClients(t)
	one := ptr(1.0)
	tests := []struct {
		name         string
		faults       fakeaws.Faults
		service      string
		action       string
		call         func() error
		wantCode     string
		wantAttempts int
	}{
		{"ec2 throttling", fakeaws.Faults{Actions: map[string]fakeaws.ActionFaults{"ec2:DescribeSubnets": {ThrottleRate: one}}},
			"ec2", "DescribeSubnets", func() error { _, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); return err },
			"RequestLimitExceeded", awsclient.MaxAttempts},
		{"ec2 5xx", fakeaws.Faults{Actions: map[string]fakeaws.ActionFaults{"ec2:Describe*": {ErrorRate: one}}},
			"ec2", "DescribeVpcs", func() error { _, err := c.EC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{}); return err },
			"InternalError", awsclient.MaxAttempts},
		{"ec2 access denied", fakeaws.Faults{AccessDenied: []string{"ec2:CreateLaunchTemplate"}},
			"ec2", "CreateLaunchTemplate", func() error {
				_, err := c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("denied"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{}})
				return err
			}, "UnauthorizedOperation", 1},
		{"ssm throttling", fakeaws.Faults{ThrottleRate: 1},
			"ssm", "GetParameter", func() error {
				_, err := c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id")})
				return err
			}, "ThrottlingException", awsclient.MaxAttempts},
		{"ssm access denied", fakeaws.Faults{AccessDenied: []string{"ssm:*"}},
			"ssm", "GetParameter", func() error {
				_, err := c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id")})
				return err
			}, "AccessDeniedException", 1},
		{"iam throttling", fakeaws.Faults{Actions: map[string]fakeaws.ActionFaults{"iam:GetRole": {ThrottleRate: one}}},
			"iam", "GetRole", func() error {
				_, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("KarpenterNodeRole-demo")})
				return err
			},
			"Throttling", awsclient.MaxAttempts},
		{"iam access denied", fakeaws.Faults{AccessDenied: []string{"iam:CreateInstanceProfile"}},
			"iam", "CreateInstanceProfile", func() error {
				_, err := c.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("denied")})
				return err
			}, "AccessDenied", 1},
		{"pricing 5xx", fakeaws.Faults{ErrorRate: 1},
			"pricing", "GetProducts", func() error {
				_, err := c.Pricing.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2")})
				return err
			}, "InternalFailure", awsclient.MaxAttempts},
		{"sqs throttling", fakeaws.Faults{ThrottleRate: 1},
			"sqs", "GetQueueUrl", func() error {
				_, err := c.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(clusterName)})
				return err
			},
			"ThrottlingException", awsclient.MaxAttempts},
		{"eks throttling", fakeaws.Faults{ThrottleRate: 1},
			"eks", "DescribeCluster", func() error {
				_, err := c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(clusterName)})
				return err
			},
			"ThrottlingException", awsclient.MaxAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setFaults(t, tt.faults)
			before := len(fake.Calls(tt.service, tt.action))
			err := tt.call()
			if code := errorCode(err); code != tt.wantCode {
				t.Fatalf("error %v: code %q, want %q", err, code, tt.wantCode)
			}
			calls := fake.Calls(tt.service, tt.action)[before:]
			if len(calls) != tt.wantAttempts {
				t.Errorf("%d attempts reached the endpoint, want %d", len(calls), tt.wantAttempts)
			}
			for _, call := range calls {
				if call.Fault == "" || call.ErrorCode != tt.wantCode {
					t.Errorf("call log entry %s, want the fault and code %s recorded", describe(call), tt.wantCode)
				}
			}
		})
	}
}

// TestRetriesRideOutFaults runs the product's own clients, with the
// product's retry policy and real backoff, through a seeded mix of
// throttling and 5xx: every call must succeed in the end.
func TestRetriesRideOutFaults(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	setFaults(t, fakeaws.Faults{Seed: 7, ThrottleRate: 0.2, ErrorRate: 0.05})
	before := len(fake.Calls("", ""))
	for i := 0; i < 20; i++ {
		if _, err := c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	faulted := 0
	for _, call := range fake.Calls("", "")[before:] {
		if call.Fault != "" {
			faulted++
		}
	}
	if faulted == 0 {
		t.Error("no fault was injected: the test proves nothing")
	}
}

// TestLatency checks the added latency is spent before answering: a call
// can only be logged as at least as slow as the latency configured for it.
func TestLatency(t *testing.T) {
	c := fastClients(t)
	setFaults(t, fakeaws.Faults{Actions: map[string]fakeaws.ActionFaults{"ec2:DescribeVpcs": {Latency: &fakeaws.Duration{Duration: 50e6}}}})
	must(c.EC2.DescribeVpcs(context.Background(), &ec2.DescribeVpcsInput{}))(t)
	calls := fake.Calls("ec2", "DescribeVpcs")
	if last := calls[len(calls)-1]; last.LatencyMS < 50 {
		t.Errorf("call logged after %vms, want at least the 50ms latency", last.LatencyMS)
	}
}

func TestFaultsAdminAPI(t *testing.T) {
	t.Cleanup(func() { _ = fake.SetFaults(fakeaws.Faults{}) })
	var got fakeaws.Faults
	in := map[string]any{"throttleRate": 0.5, "latency": "10ms", "insufficientCapacity": []map[string]string{{"instanceType": "m5.large", "capacityType": "spot"}}}
	if code := admin(t, "PUT", "/_fake/faults", in, &got); code != 200 {
		t.Fatalf("PUT /_fake/faults: HTTP %d", code)
	}
	if f := fake.Faults(); f.ThrottleRate != 0.5 || f.Latency.Milliseconds() != 10 || len(f.InsufficientCapacity) != 1 {
		t.Errorf("faults after PUT = %+v", f)
	}
	var bad map[string]string
	for _, body := range []map[string]any{{"throttleRate": 2}, {"accessDenied": []string{"CreateFleet"}}, {"insufficientCapacity": []map[string]string{{"capacityType": "reserved"}}}, {"throtleRate": 0.1}} {
		if code := admin(t, "PUT", "/_fake/faults", body, &bad); code != 400 || bad["error"] == "" {
			t.Errorf("PUT %v: HTTP %d %v, want 400 naming the problem", body, code, bad)
		}
	}
}

func TestEventualConsistency(t *testing.T) {
	ctx := context.Background()
	c := fastClients(t)
	setFaults(t, fakeaws.Faults{DescribeDelay: fakeaws.Duration{Duration: 3600e9}})
	run := must(c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId:      aws.String(imageID(t, "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")),
		InstanceType: "m5.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(fake.Seed().SubnetIDs[0]),
	}))(t)
	id := aws.ToString(run.Instances[0].InstanceId)
	t.Cleanup(func() { terminate(t, id) })

	listed := func() bool {
		out := must(c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}))(t)
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				if aws.ToString(i.InstanceId) == id {
					return true
				}
			}
		}
		return false
	}
	if listed() {
		t.Error("a new instance is listed by DescribeInstances inside the consistency window")
	}
	_, err := c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if errorCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("DescribeInstances by ID inside the window: %v, want InvalidInstanceID.NotFound", err)
	}
	if err := fake.SetFaults(fakeaws.Faults{}); err != nil {
		t.Fatal(err)
	}
	if !listed() {
		t.Error("the instance is still missing once the window is over")
	}
}

// TestCallLogFile reads the JSON lines log a run leaves behind.
func TestCallLogFile(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	must(c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:" + fakeaws.DiscoveryTag), Values: []string{clusterName}}}}))(t)
	f, err := os.Open(callLogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last fakeaws.Call
	lines := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines++
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("line %d is not a JSON call: %v: %s", lines, err, sc.Text())
		}
	}
	if last.Service != "ec2" || last.Action != "DescribeSubnets" || last.Status != 200 || last.Time.IsZero() {
		t.Errorf("last logged call = %s, want the DescribeSubnets just made", describe(last))
	}
	var viaAdmin []fakeaws.Call
	admin(t, "GET", "/_fake/calls?service=ec2&action=DescribeSubnets", nil, &viaAdmin)
	if len(viaAdmin) == 0 || !strings.EqualFold(viaAdmin[len(viaAdmin)-1].Action, "DescribeSubnets") {
		t.Errorf("admin call log: %d DescribeSubnets calls", len(viaAdmin))
	}
}

func imageID(t *testing.T, path string) string {
	t.Helper()
	p := must(clients(t).SSM.GetParameter(context.Background(), &ssm.GetParameterInput{Name: aws.String(path)}))(t)
	return aws.ToString(p.Parameter.Value)
}

func terminate(t *testing.T, ids ...string) {
	t.Helper()
	if len(ids) == 0 {
		return
	}
	if _, err := clients(t).EC2.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
		t.Errorf("terminating %v: %v", ids, err)
	}
}
