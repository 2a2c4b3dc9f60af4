package instance

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

// A fleet's failed offerings are each counted, as Karpenter's AWS provider
// counts them: by zone, zone ID (from the overrides), capacity type and
// Karpenter's reason.
func TestLaunchFailuresCountedPerOffering(t *testing.T) {
	fleetError := func(code, zone string) ec2types.CreateFleetError {
		return ec2types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String("nope"),
			LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
				InstanceType: "m5.large", SubnetId: aws.String("s-" + zone), AvailabilityZone: aws.String("us-east-1" + zone)}}}
	}
	count := func(zone, zoneID, reason string) float64 {
		return testutil.ToFloat64(metrics.InstanceLaunchFailures.WithLabelValues(zone, zoneID, "spot", reason))
	}
	beforeA, beforeB := count("us-east-1a", "use1-az1", "LaunchFailed"), count("us-east-1b", "use1-az2", "VCPULimitExceeded")
	ctr := &counting{calls: map[string]int{}, fleet: func(in *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error) {
		return &ec2.CreateFleetOutput{Errors: []ec2types.CreateFleetError{fleetError("InsufficientInstanceCapacity", "a"), fleetError("VcpuLimitExceeded", "b")}}, nil
	}}
	p := New(Options{EC2: ctr, ClusterName: "demo"})
	_, _ = p.Create(context.Background(), Request{CapacityType: CapacityTypeSpot, Token: "t", Overrides: []Override{
		{LaunchTemplate: "lt", InstanceType: "m5.large", SubnetID: "s-a", Zone: "us-east-1a", ZoneID: "use1-az1", Price: 1},
		{LaunchTemplate: "lt", InstanceType: "m5.large", SubnetID: "s-b", Zone: "us-east-1b", ZoneID: "use1-az2", Price: 1}}})
	if d := count("us-east-1a", "use1-az1", "LaunchFailed") - beforeA; d != 1 {
		t.Errorf("insufficient capacity in us-east-1a counted %v times, want once as LaunchFailed", d)
	}
	if d := count("us-east-1b", "use1-az2", "VCPULimitExceeded") - beforeB; d != 1 {
		t.Errorf("the vCPU limit in us-east-1b counted %v times, want once as VCPULimitExceeded", d)
	}
}

func TestLaunchFailureReason(t *testing.T) {
	for text, want := range map[string]string{
		"AuthFailure.ServiceLinkedRoleCreationNotPermitted: no":           "SpotSLRCreationFailed",
		"UnauthorizedOperation: You are not authorized":                   "Unauthorized",
		"InvalidLaunchTemplateId.NotFound: gone":                          "LaunchTemplateNotFound",
		"MaxSpotInstanceCountExceeded: too many":                          "SpotQuotaExceeded",
		"InsufficientFreeAddressesInSubnet: full":                         "InsufficientFreeAddressesInSubnet",
		"InsufficientInstanceCapacity: We currently do not have capacity": "LaunchFailed",
	} {
		if got := LaunchFailureReason(text); got != want {
			t.Errorf("%q: %s, want %s", text, got, want)
		}
	}
}
