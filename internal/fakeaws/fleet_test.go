package fakeaws_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// override is one CreateFleet override; zone "" sends only the subnet, so
// the endpoint has to find the zone itself.
type override struct {
	typ, zone string
	priority  *float64
	template  int // index of the launch template config
}

var templates = map[string]string{}

// launchTemplate makes (once) a template with no user data: the instances
// these tests launch are not meant to join the cluster.
func launchTemplate(t *testing.T, name string) string {
	t.Helper()
	if id, ok := templates[name]; ok {
		return id
	}
	out := must(clients(t).EC2.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId: aws.String(imageID(t, "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")),
		},
	}))(t)
	templates[name] = aws.ToString(out.LaunchTemplate.LaunchTemplateId)
	return templates[name]
}

func subnetIn(zone string) string {
	for i, z := range fake.Seed().Zones {
		if z == zone {
			return fake.Seed().SubnetIDs[i]
		}
	}
	panic("no seeded subnet in " + zone)
}

func createFleet(t *testing.T, capacityType string, strategy string, overrides []override) *ec2.CreateFleetOutput {
	t.Helper()
	byTemplate := map[int][]ec2types.FleetLaunchTemplateOverridesRequest{}
	for _, o := range overrides {
		zone := o.zone
		subnet := subnetIn(strings.TrimSuffix(zone, "?"))
		r := ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(o.typ), SubnetId: aws.String(subnet), Priority: o.priority}
		if !strings.HasSuffix(zone, "?") {
			r.AvailabilityZone = aws.String(zone)
		}
		byTemplate[o.template] = append(byTemplate[o.template], r)
	}
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	for i := 0; i < len(byTemplate); i++ {
		configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(launchTemplate(t, fmt.Sprintf("fleet-test-%d", i))), Version: aws.String("$Latest")},
			Overrides:                   byTemplate[i],
		})
	}
	in := &ec2.CreateFleetInput{
		Type:                        ec2types.FleetTypeInstant,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capacityType)},
		LaunchTemplateConfigs:       configs,
		ClientToken:                 aws.String(fmt.Sprintf("%s-%d", t.Name(), len(overrides))),
	}
	if capacityType == "spot" {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategy(strategy)}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategy(strategy)}
	}
	out, err := clients(t).EC2.CreateFleet(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range out.Instances {
		ids = append(ids, i.InstanceIds...)
	}
	t.Cleanup(func() { terminate(t, ids...) })
	return out
}

type launched struct{ typ, zone, template string }

func launchedOf(t *testing.T, out *ec2.CreateFleetOutput) []launched {
	t.Helper()
	var got []launched
	for _, i := range out.Instances {
		for _, id := range i.InstanceIds {
			inst := must(clients(t).EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}}))(t)
			in := inst.Reservations[0].Instances[0]
			got = append(got, launched{string(in.InstanceType), aws.ToString(in.Placement.AvailabilityZone), aws.ToString(i.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateId)})
		}
	}
	return got
}

func TestCreateFleetInsufficientCapacity(t *testing.T) {
	tests := []struct {
		name         string
		capacity     []fakeaws.Capacity
		capacityType string
		overrides    []override
		want         []launched // template left empty
		wantErrors   []string   // type/zone of each error
		wantMessage  string
	}{
		{
			name:         "cheapest type out of on-demand capacity everywhere: the next one launches",
			capacity:     []fakeaws.Capacity{{InstanceType: "c5.large", CapacityType: "on-demand"}},
			capacityType: "on-demand",
			overrides:    []override{{typ: "c5.large", zone: "us-east-1a"}, {typ: "m5.large", zone: "us-east-1a"}, {typ: "c5.large", zone: "us-east-1b"}},
			want:         []launched{{typ: "m5.large", zone: "us-east-1a"}},
			wantErrors:   []string{"c5.large/us-east-1a", "c5.large/us-east-1b"},
			wantMessage:  "We currently do not have sufficient c5.large capacity in the Availability Zone you requested (us-east-1a)",
		},
		{
			name:         "one zone out of spot capacity, zones found from the subnets",
			capacity:     []fakeaws.Capacity{{Zone: "us-east-1a", CapacityType: "spot"}},
			capacityType: "spot",
			overrides:    []override{{typ: "m5.large", zone: "us-east-1a?"}, {typ: "m5.large", zone: "us-east-1b?"}},
			want:         []launched{{typ: "m5.large", zone: "us-east-1b"}},
			wantErrors:   []string{"m5.large/"},
			wantMessage:  "There is no Spot capacity available that matches your request.",
		},
		{
			name:         "spot shortage leaves on-demand alone",
			capacity:     []fakeaws.Capacity{{InstanceType: "m5.large", CapacityType: "spot"}},
			capacityType: "on-demand",
			overrides:    []override{{typ: "m5.large", zone: "us-east-1a"}},
			want:         []launched{{typ: "m5.large", zone: "us-east-1a"}},
		},
		{
			name:         "nothing left: no instance, an error per override",
			capacity:     []fakeaws.Capacity{{}},
			capacityType: "on-demand",
			overrides:    []override{{typ: "m5.large", zone: "us-east-1a"}, {typ: "m5.large", zone: "us-east-1b"}, {typ: "t3.large", zone: "us-east-1c", template: 1}},
			wantErrors:   []string{"m5.large/us-east-1a", "m5.large/us-east-1b", "t3.large/us-east-1c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setFaults(t, fakeaws.Faults{InsufficientCapacity: tt.capacity})
			out := createFleet(t, tt.capacityType, "lowest-price", tt.overrides)
			got := launchedOf(t, out)
			for i := range got {
				got[i].template = ""
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("launched %v, want %v", got, tt.want)
			}
			if aws.ToString(out.FleetId) == "" {
				t.Error("no fleet ID")
			}
			var errs []string
			for _, e := range out.Errors {
				o := e.LaunchTemplateAndOverrides.Overrides
				errs = append(errs, string(o.InstanceType)+"/"+aws.ToString(o.AvailabilityZone))
				if aws.ToString(e.ErrorCode) != "InsufficientInstanceCapacity" || string(e.Lifecycle) != tt.capacityType ||
					!strings.HasPrefix(aws.ToString(e.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateId), "lt-") {
					t.Errorf("error entry %s", describe(e))
				}
				if tt.wantMessage != "" && !strings.HasPrefix(aws.ToString(e.ErrorMessage), tt.wantMessage) && len(errs) == 1 {
					t.Errorf("message %q, want it to start %q", aws.ToString(e.ErrorMessage), tt.wantMessage)
				}
			}
			if fmt.Sprint(errs) != fmt.Sprint(tt.wantErrors) && !(len(errs) == 0 && len(tt.wantErrors) == 0) {
				t.Errorf("errors for %v, want %v", errs, tt.wantErrors)
			}
			calls := fake.Calls("ec2", "CreateFleet")
			last := calls[len(calls)-1]
			if len(tt.wantErrors) > 0 && last.Fault != "insufficientCapacity" {
				t.Errorf("call log entry %s, want fault insufficientCapacity", describe(last))
			}
			if len(last.Instances) != len(tt.want) {
				t.Errorf("call log records %d launched instances, want %d", len(last.Instances), len(tt.want))
			}
		})
	}
}

// TestCreateFleetAllocationStrategy checks the endpoint launches what EC2
// would, not moto's first override.
func TestCreateFleetAllocationStrategy(t *testing.T) {
	cheapestSpot := func(types []string, zone string) string {
		best, bestPrice := "", 0.0
		for _, typ := range types {
			p := catalog.SpotPrice(typ, zone, catalogPrice(t, region, typ))
			if best == "" || p < bestPrice {
				best, bestPrice = typ, p
			}
		}
		return best
	}
	tests := []struct {
		name         string
		capacityType string
		strategy     string
		overrides    []override
		want         launched
	}{
		{"on-demand lowest-price takes the cheapest, whatever the order", "on-demand", "lowest-price",
			[]override{{typ: "m5.xlarge", zone: "us-east-1a"}, {typ: "m5.large", zone: "us-east-1a"}, {typ: "c6a.large", zone: "us-east-1b"}},
			launched{typ: "c6a.large", zone: "us-east-1b", template: "fleet-test-0"}},
		{"the cheapest may be in the second template", "on-demand", "lowest-price",
			[]override{{typ: "m5.xlarge", zone: "us-east-1a"}, {typ: "t3a.medium", zone: "us-east-1c", template: 1}},
			launched{typ: "t3a.medium", zone: "us-east-1c", template: "fleet-test-1"}},
		{"prioritized follows the priorities", "on-demand", "prioritized",
			[]override{{typ: "c6a.large", zone: "us-east-1a", priority: ptr(2.0)}, {typ: "m5.xlarge", zone: "us-east-1a", priority: ptr(0.0)}},
			launched{typ: "m5.xlarge", zone: "us-east-1a", template: "fleet-test-0"}},
		{"spot price-capacity-optimized takes the cheapest spot price", "spot", "price-capacity-optimized",
			[]override{{typ: "m5.large", zone: "us-east-1a"}, {typ: "m6i.large", zone: "us-east-1a"}, {typ: "m5a.large", zone: "us-east-1a"}},
			launched{typ: cheapestSpot([]string{"m5.large", "m6i.large", "m5a.large"}, "us-east-1a"), zone: "us-east-1a", template: "fleet-test-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := createFleet(t, tt.capacityType, tt.strategy, tt.overrides)
			got := launchedOf(t, out)
			want := tt.want
			want.template = launchTemplate(t, tt.want.template)
			if len(got) != 1 || got[0] != want {
				t.Errorf("launched %v, want %v", got, want)
			}
		})
	}
}

// TestLostAnswersAndClientTokens: a launch whose answer is lost still
// launched, and only the call's own client token gets its instance back,
// as on EC2; the token with other parameters is refused.
func TestLostAnswersAndClientTokens(t *testing.T) {
	ctx := context.Background()
	c := fastClients(t)
	in := &ec2.CreateFleetInput{
		Type:                        ec2types.FleetTypeInstant,
		ClientToken:                 aws.String(t.Name()),
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(launchTemplate(t, "fleet-test-0")), Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(subnetIn("us-east-1a"))}},
		}},
	}
	always := 1.0
	setFaults(t, fakeaws.Faults{Actions: map[string]fakeaws.ActionFaults{"ec2:CreateFleet": {LostRate: &always}}})
	before := len(fake.Calls("ec2", "CreateFleet"))
	_, err := c.EC2.CreateFleet(ctx, in)
	if code := errorCode(err); code != "InternalError" {
		t.Fatalf("every answer lost: error %v, want InternalError", err)
	}
	var launchedIDs []string
	for i, call := range fake.Calls("ec2", "CreateFleet")[before:] {
		if call.Fault != "lost" || call.Replayed != (i > 0) {
			t.Errorf("attempt %d logged as %s, want fault lost, replayed after the first", i+1, describe(call))
		}
		launchedIDs = append(launchedIDs, call.Instances...)
	}
	if len(launchedIDs) != 1 {
		t.Fatalf("the lost attempts launched %v, want one instance: the first, and the retries replayed it", launchedIDs)
	}
	t.Cleanup(func() { terminate(t, launchedIDs...) })

	tests := []struct {
		name     string
		change   func(*ec2.CreateFleetInput)
		wantCode string
		wantIDs  []string
	}{
		{"the same call again answers the lost launch", func(*ec2.CreateFleetInput) {}, "", launchedIDs},
		{"the token with other parameters is refused", func(in *ec2.CreateFleetInput) { in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(2) },
			"IdempotentParameterMismatch", nil},
	}
	setFaults(t, fakeaws.Faults{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			again := *in
			spec := *in.TargetCapacitySpecification
			again.TargetCapacitySpecification = &spec
			tt.change(&again)
			before := len(fake.Calls("ec2", "CreateFleet"))
			out, err := c.EC2.CreateFleet(ctx, &again)
			if code := errorCode(err); code != tt.wantCode {
				t.Fatalf("error %v, want code %q", err, tt.wantCode)
			}
			var ids []string
			if out != nil {
				for _, i := range out.Instances {
					ids = append(ids, i.InstanceIds...)
				}
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.wantIDs) {
				t.Errorf("answered instances %v, want %v", ids, tt.wantIDs)
			}
			for _, call := range fake.Calls("ec2", "CreateFleet")[before:] {
				if len(call.Instances) > 0 {
					t.Errorf("call %s launched again", describe(call))
				}
			}
		})
	}
}
