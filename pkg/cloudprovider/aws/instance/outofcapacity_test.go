package instance

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// spreadFull is EC2's refusal in a spread placement group that holds its
// seven instances in the zone.
func spreadFull(e ec2types.CreateFleetError) ec2types.CreateFleetError {
	e.ErrorMessage = aws.String("We currently do not have sufficient capacity to launch all of the instances in this request. You have reached the limit of instances in this spread placement group for this Availability Zone.")
	return e
}

// An instant fleet that falls through offerings without capacity launches
// the next one and lists the others in its Errors; the launched instance
// names them so the caller can mark them unavailable.
func TestLaunchPastCapacityErrorsNamesTheOfferings(t *testing.T) {
	fleetError := func(code, zone string) ec2types.CreateFleetError {
		return ec2types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String("nope"),
			LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
				InstanceType: "m5.large", SubnetId: aws.String("s-" + zone), AvailabilityZone: aws.String("us-east-1" + zone)}}}
	}
	cases := []struct {
		name   string
		errors []ec2types.CreateFleetError
		want   []Offering
	}{
		{name: "no errors", want: nil},
		{name: "the cheaper type out in both zones", errors: []ec2types.CreateFleetError{fleetError("InsufficientInstanceCapacity", "a"), fleetError("InsufficientInstanceCapacity", "b")},
			want: []Offering{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: CapacityTypeOnDemand}, {InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: CapacityTypeOnDemand}}},
		{name: "an error that is not about capacity", errors: []ec2types.CreateFleetError{fleetError("InvalidParameterValue", "a")}, want: nil},
		{name: "a spread group's limit in a zone", errors: []ec2types.CreateFleetError{spreadFull(fleetError("InsufficientInstanceCapacity", "a"))},
			want: []Offering{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: CapacityTypeOnDemand, SpreadLimit: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctr := &counting{calls: map[string]int{}, fleet: func(in *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error) {
				return &ec2.CreateFleetOutput{Errors: tc.errors, Instances: []ec2types.CreateFleetInstance{{
					InstanceIds: []string{"i-0123456789abcdef0"}, InstanceType: "m5.xlarge",
					LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
						InstanceType: "m5.xlarge", SubnetId: aws.String("s-a"), AvailabilityZone: aws.String("us-east-1a")}},
				}}}, nil
			}}
			p := New(Options{EC2: ctr, ClusterName: "demo"})
			var overrides []Override
			for i, it := range []string{"m5.large", "m5.xlarge"} {
				for _, zone := range []string{"a", "b"} {
					overrides = append(overrides, Override{LaunchTemplate: "lt", InstanceType: it, SubnetID: "s-" + zone, Zone: "us-east-1" + zone, Price: float64(i + 1)})
				}
			}
			inst, err := p.Create(context.Background(), Request{CapacityType: CapacityTypeOnDemand, Token: "t", Overrides: overrides})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if inst.Type != "m5.xlarge" || !reflect.DeepEqual(inst.OutOfCapacity, tc.want) {
				t.Fatalf("launched %s, out of capacity %v; want m5.xlarge, %v", inst.Type, inst.OutOfCapacity, tc.want)
			}
		})
	}
}

// A fleet that launched nothing fails with a capacity error when EC2 said
// capacity, the account's limits included, and with a plain error for a
// configuration mistake; spot without its service-linked role takes spot
// out whole.
func TestFleetErrorsThatAreCapacity(t *testing.T) {
	fleetError := func(code string, withOverride bool) ec2types.CreateFleetError {
		e := ec2types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String("nope")}
		if withOverride {
			e.LaunchTemplateAndOverrides = &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
				InstanceType: "m5.large", SubnetId: aws.String("s-a"), AvailabilityZone: aws.String("us-east-1a")}}
		}
		return e
	}
	type fleetCase struct {
		name         string
		capacityType string
		errors       []ec2types.CreateFleetError
		wantICE      bool
		wantTypeOut  string
		wantGone     bool
		// wantMsg is in the error's message.
		wantMsg string
	}
	cases := []fleetCase{
		{name: "insufficient capacity", capacityType: CapacityTypeOnDemand, errors: []ec2types.CreateFleetError{fleetError("InsufficientInstanceCapacity", true)}, wantICE: true},
		{name: "the account's vCPU limit", capacityType: CapacityTypeOnDemand, errors: []ec2types.CreateFleetError{fleetError("VcpuLimitExceeded", false)}, wantICE: true},
		{name: "the account's fleet limit", capacityType: CapacityTypeSpot, errors: []ec2types.CreateFleetError{fleetError("MaxFleetCountExceeded", false)}, wantICE: true},
		{name: "spot without its service-linked role", capacityType: CapacityTypeSpot,
			errors: []ec2types.CreateFleetError{fleetError("AuthFailure.ServiceLinkedRoleCreationNotPermitted", true)}, wantICE: true, wantTypeOut: CapacityTypeSpot,
			wantMsg: "no spot service-linked role and Joiner may not create it; launching on-demand where pools allow it until it is created (aws iam create-service-linked-role --aws-service-name spot.amazonaws.com)"},
		{name: "a configuration error", capacityType: CapacityTypeOnDemand, errors: []ec2types.CreateFleetError{fleetError("InvalidParameterValue", true)}},
		{name: "a launch template gone", capacityType: CapacityTypeOnDemand, errors: []ec2types.CreateFleetError{fleetError("InvalidLaunchTemplateId.NotFound", true)}, wantGone: true},
	}
	// Karpenter's capacity codes, then those Joiner adds: each takes the
	// offering it names out.
	for _, code := range []string{"InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded", "UnfulfillableCapacity", "Unsupported",
		"InsufficientFreeAddressesInSubnet", "MaxFleetCountExceeded", "ReservationCapacityExceeded",
		"InsufficientHostCapacity", "InsufficientReservedInstanceCapacity", "InsufficientCapacity", "SpotMaxPriceTooLow"} {
		cases = append(cases, fleetCase{name: code + " on an offering", capacityType: CapacityTypeOnDemand, errors: []ec2types.CreateFleetError{fleetError(code, true)}, wantICE: true})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctr := &counting{calls: map[string]int{}, fleet: func(in *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error) {
				return &ec2.CreateFleetOutput{Errors: tc.errors}, nil
			}}
			p := New(Options{EC2: ctr, ClusterName: "demo"})
			_, err := p.Create(context.Background(), Request{CapacityType: tc.capacityType, Token: "t",
				Overrides: []Override{{LaunchTemplate: "lt", InstanceType: "m5.large", SubnetID: "s-a", Zone: "us-east-1a", Price: 1}}})
			var ice *InsufficientCapacityError
			if errors.As(err, &ice) != tc.wantICE {
				t.Fatalf("Create: %v; want a capacity error %v", err, tc.wantICE)
			}
			if IsLaunchTemplateNotFound(err) != tc.wantGone {
				t.Errorf("Create: %v; want a missing launch template %v", err, tc.wantGone)
			}
			if tc.wantICE && ice.CapacityTypeOut != tc.wantTypeOut {
				t.Errorf("capacity type out %q, want %q", ice.CapacityTypeOut, tc.wantTypeOut)
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Create: %v; want the message to say %q", err, tc.wantMsg)
			}
			if tc.wantICE && tc.wantTypeOut == "" && tc.errors[0].LaunchTemplateAndOverrides != nil && len(ice.Offerings) != 1 {
				t.Errorf("offerings out %v, want the one EC2 named", ice.Offerings)
			}
		})
	}
}
