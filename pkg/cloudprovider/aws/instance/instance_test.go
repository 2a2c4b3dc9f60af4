package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/joiner-autoscaler/joiner/internal/mototest"
)

func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }

// counting wraps EC2 and counts calls per action.
type counting struct {
	EC2API
	mu    sync.Mutex
	calls map[string]int
	fleet func(*ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error)
}

func (c *counting) count(action string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[action]++
}

func (c *counting) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	c.count("CreateFleet")
	if c.fleet != nil {
		return c.fleet(in)
	}
	return c.EC2API.CreateFleet(ctx, in, opts...)
}

func (c *counting) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	c.count("DescribeInstances")
	return c.EC2API.DescribeInstances(ctx, in, opts...)
}

func (c *counting) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	c.count("TerminateInstances")
	return c.EC2API.TerminateInstances(ctx, in, opts...)
}

type fixture struct {
	ec2      *ec2.Client
	subnets  map[string]string // zone -> subnet
	template string
}

func setup(t *testing.T) fixture {
	t.Helper()
	mototest.Current().Reset(t)
	ctx := context.Background()
	client := mototest.Clients(t, "").EC2
	vpc, err := client.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{ec2: client, subnets: map[string]string{}, template: "lt-test"}
	for i, zone := range []string{"us-east-1a", "us-east-1b"} {
		s, err := client.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i)), AvailabilityZone: aws.String(zone)})
		if err != nil {
			t.Fatal(err)
		}
		f.subnets[zone] = *s.Subnet.SubnetId
	}
	images, err := client.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("no image in moto: %v", err)
	}
	if _, err := client.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(f.template),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: images.Images[0].ImageId}}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f fixture) request(token string, types ...string) Request {
	r := Request{CapacityType: CapacityTypeOnDemand, Token: token, Tags: map[string]string{"kubernetes.io/cluster/demo": "owned", "karpenter.sh/nodepool": "default"}}
	for i, it := range types {
		for _, zone := range []string{"us-east-1a", "us-east-1b"} {
			r.Overrides = append(r.Overrides, Override{LaunchTemplate: f.template, InstanceType: it, SubnetID: f.subnets[zone], Zone: zone, Price: float64(i + 1)})
		}
	}
	return r
}

func TestConcurrentLaunchesShareOneFleetCall(t *testing.T) {
	cases := []struct {
		name      string
		requests  []Request
		wantFleet int
	}{
		{name: "same configuration: one call", wantFleet: 1},
		{name: "different configurations: one call each", wantFleet: 2},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			ctr := &counting{EC2API: f.ec2, calls: map[string]int{}}
			p := New(Options{EC2: ctr, ClusterName: "demo"})
			reqs := []Request{f.request("a", "m5.large"), f.request("b", "m5.large"), f.request("c", "m5.large")}
			if i == 1 {
				reqs[2] = f.request("c", "c5.large")
			}
			var wg sync.WaitGroup
			got := make([]*Instance, len(reqs))
			errs := make([]error, len(reqs))
			for j := range reqs {
				wg.Add(1)
				go func() { defer wg.Done(); got[j], errs[j] = p.Create(context.Background(), reqs[j]) }()
			}
			wg.Wait()
			ids := map[string]bool{}
			for j := range reqs {
				if errs[j] != nil {
					t.Fatalf("launch %d: %v", j, errs[j])
				}
				ids[got[j].ID] = true
				if got[j].Zone == "" || got[j].Type == "" {
					t.Fatalf("launch %d has no zone or type: %+v", j, got[j])
				}
			}
			if len(ids) != len(reqs) {
				t.Fatalf("%d distinct instances for %d launches", len(ids), len(reqs))
			}
			if ctr.calls["CreateFleet"] != tc.wantFleet {
				t.Fatalf("%d CreateFleet calls, want %d", ctr.calls["CreateFleet"], tc.wantFleet)
			}
			// The instances exist, with the launch tags, and one Get each,
			// concurrently, costs one DescribeInstances.
			var gets atomic.Int32
			var wg2 sync.WaitGroup
			for id := range ids {
				wg2.Add(1)
				go func() {
					defer wg2.Done()
					inst, err := p.Get(context.Background(), id)
					if err != nil {
						t.Errorf("get %s: %v", id, err)
						return
					}
					if inst.Tags["karpenter.sh/nodepool"] != "default" {
						t.Errorf("instance %s tags %v", id, inst.Tags)
					}
					gets.Add(1)
				}()
			}
			wg2.Wait()
			if ctr.calls["DescribeInstances"] != 1 {
				t.Fatalf("%d DescribeInstances calls for %d concurrent gets, want 1", ctr.calls["DescribeInstances"], gets.Load())
			}
		})
	}
}

// A fleet is offered the 60 cheapest types, each in every zone it has an
// offering in, in price order, and never more than EC2's 300 overrides.
func TestOverridesAreTheCheapestSixtyTypesInPriceOrder(t *testing.T) {
	cases := []struct {
		name      string
		types     int
		zones     int
		wantTypes int
		wantOver  int
	}{
		{name: "100 types in 3 zones: 60 types, all their zones", types: 100, zones: 3, wantTypes: 60, wantOver: 180},
		{name: "80 types in 6 zones: EC2's 300 overrides", types: 80, zones: 6, wantTypes: 50, wantOver: 300},
		{name: "few types: all", types: 4, zones: 2, wantTypes: 4, wantOver: 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var in []Override
			for i := tc.types; i > 0; i-- {
				for z := range tc.zones {
					// A type's price rises a little by zone; types are a
					// whole unit apart, so price order is type order.
					in = append(in, Override{LaunchTemplate: "lt", InstanceType: fmt.Sprintf("t%03d", i), SubnetID: fmt.Sprintf("s%d", z),
						Zone: fmt.Sprintf("z%d", z), Price: float64(i) + float64(z)/100})
				}
			}
			var sent *ec2.CreateFleetInput
			ctr := &counting{calls: map[string]int{}, fleet: func(in *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error) {
				sent = in
				return &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{{InstanceIds: []string{"i-1"}, InstanceType: "t001",
					LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{SubnetId: aws.String("s0"), AvailabilityZone: aws.String("z0")}}}}}, nil
			}}
			p := New(Options{EC2: ctr, ClusterName: "demo"})
			if _, err := p.Create(context.Background(), Request{CapacityType: CapacityTypeOnDemand, Overrides: in, Token: "t"}); err != nil {
				t.Fatal(err)
			}
			ovs := sent.LaunchTemplateConfigs[0].Overrides
			if len(ovs) != tc.wantOver {
				t.Fatalf("%d overrides, want %d", len(ovs), tc.wantOver)
			}
			types := map[string]bool{}
			for i, o := range ovs {
				types[string(o.InstanceType)] = true
				if want := fmt.Sprintf("t%03d", i/tc.zones+1); string(o.InstanceType) != want || aws.ToFloat64(o.Priority) != float64(i) {
					t.Fatalf("override %d is %s priority %v, want %s priority %d", i, o.InstanceType, aws.ToFloat64(o.Priority), want, i)
				}
			}
			if len(types) != tc.wantTypes {
				t.Errorf("%d types, want %d", len(types), tc.wantTypes)
			}
			if sent.OnDemandOptions == nil || sent.OnDemandOptions.AllocationStrategy != ec2types.FleetOnDemandAllocationStrategyLowestPrice {
				t.Fatalf("on-demand options %+v", sent.OnDemandOptions)
			}
		})
	}
}

func TestCapacityErrorsNameTheOfferings(t *testing.T) {
	cases := []struct {
		name    string
		code    string
		wantICE bool
	}{
		{name: "insufficient capacity", code: "InsufficientInstanceCapacity", wantICE: true},
		{name: "a configuration error is not a capacity error", code: "InvalidLaunchTemplateName.NotFoundException", wantICE: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctr := &counting{calls: map[string]int{}, fleet: func(in *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error) {
				return &ec2.CreateFleetOutput{Errors: []ec2types.CreateFleetError{{ErrorCode: aws.String(tc.code), ErrorMessage: aws.String("nope"),
					LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
						InstanceType: "m5.large", SubnetId: aws.String("s-a"), AvailabilityZone: aws.String("us-east-1a")}}}}}, nil
			}}
			p := New(Options{EC2: ctr, ClusterName: "demo"})
			_, err := p.Create(context.Background(), Request{CapacityType: CapacityTypeSpot, Token: "t",
				Overrides: []Override{{LaunchTemplate: "lt", InstanceType: "m5.large", SubnetID: "s-a", Zone: "us-east-1a"}}})
			var ice *InsufficientCapacityError
			if got := errors.As(err, &ice); got != tc.wantICE {
				t.Fatalf("error %v: capacity error %v, want %v", err, got, tc.wantICE)
			}
			if tc.wantICE && (len(ice.Offerings) != 1 || ice.Offerings[0] != (Offering{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: CapacityTypeSpot})) {
				t.Fatalf("offerings %+v", ice.Offerings)
			}
		})
	}
}

func TestDeleteEndsInNotFound(t *testing.T) {
	f := setup(t)
	p := New(Options{EC2: f.ec2, ClusterName: "demo"})
	inst, err := p.Create(context.Background(), f.request("d", "m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := p.List(context.Background())
	if err != nil || len(listed) != 1 || listed[0].ID != inst.ID {
		t.Fatalf("list %v %v", listed, err)
	}
	if err := p.Delete(context.Background(), inst.ID); err != nil {
		t.Fatalf("first delete: %v", err)
	}
	// moto terminates at once; the next call must say the instance is gone.
	if err := p.Delete(context.Background(), inst.ID); !IsNotFound(err) {
		t.Fatalf("second delete: %v, want not found", err)
	}
	if _, err := p.Get(context.Background(), "i-0000000000000dead"); !IsNotFound(err) {
		t.Fatalf("get of an unknown instance: %v, want not found", err)
	}
	listed, err = p.List(context.Background())
	if err != nil || len(listed) != 0 {
		t.Fatalf("list after delete %v %v", listed, err)
	}
}

func TestParseProviderID(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{in: "aws:///us-east-1a/i-0123", want: "i-0123"},
		{in: "kwok://x", err: "not of the form"},
		{in: "aws:///us-east-1a", err: "not of the form"},
	}
	for _, tc := range cases {
		got, err := ParseProviderID(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("%s: %v", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Fatalf("%s: %q %v", tc.in, got, err)
		}
	}
}

func TestListKeepsToTheCluster(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	ours := New(Options{EC2: f.ec2, ClusterName: "demo"})
	theirs := New(Options{EC2: f.ec2, ClusterName: "other"})
	mine, err := ours.Create(ctx, f.request("mine", "m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	req := f.request("theirs", "m5.large")
	req.Tags = map[string]string{"kubernetes.io/cluster/other": "owned", "karpenter.sh/nodepool": "default"}
	if _, err := theirs.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	listed, err := ours.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != mine.ID {
		var ids []string
		for _, i := range listed {
			ids = append(ids, i.ID)
		}
		t.Fatalf("cluster demo lists %v, want only %s", ids, mine.ID)
	}
}

// TestRecentReusesDescriptions: drift checks read the description Get or
// List last made while it is young enough, and describe again once it is
// older, or once List no longer shows the instance.
func TestRecentReusesDescriptions(t *testing.T) {
	cases := []struct {
		name string
		// prime describes the instance first: "get", "list" or "" (not at all).
		prime     string
		terminate bool
		maxAge    time.Duration
		wantCalls int
		wantGone  bool
	}{
		{name: "described by Get, young enough", prime: "get", maxAge: time.Hour, wantCalls: 0},
		{name: "described by List, young enough", prime: "list", maxAge: time.Hour, wantCalls: 0},
		{name: "described, too old", prime: "get", maxAge: 0, wantCalls: 1},
		{name: "never described", maxAge: time.Hour, wantCalls: 1},
		{name: "terminated: List drops it, so it is described again", prime: "list", terminate: true, maxAge: time.Hour, wantCalls: 1, wantGone: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			ctr := &counting{EC2API: f.ec2, calls: map[string]int{}}
			p := New(Options{EC2: ctr, ClusterName: "demo"})
			ctx := context.Background()
			inst, err := p.Create(ctx, f.request("r", "m5.large"))
			if err != nil {
				t.Fatal(err)
			}
			switch tc.prime {
			case "get":
				_, err = p.Get(ctx, inst.ID)
			case "list":
				_, err = p.List(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.terminate {
				if _, err := f.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{inst.ID}}); err != nil {
					t.Fatal(err)
				}
				if _, err := p.List(ctx); err != nil {
					t.Fatal(err)
				}
			}
			before := ctr.calls["DescribeInstances"]
			got, err := p.Recent(ctx, inst.ID, tc.maxAge)
			if calls := ctr.calls["DescribeInstances"] - before; calls != tc.wantCalls {
				t.Errorf("%d DescribeInstances calls, want %d", calls, tc.wantCalls)
			}
			if tc.wantGone {
				if !IsNotFound(err) {
					t.Fatalf("Recent = %v, %v; want not found", got, err)
				}
				return
			}
			if err != nil || got.ID != inst.ID || got.SubnetID == "" {
				t.Fatalf("Recent = %+v, %v", got, err)
			}
		})
	}
}

// tagRecorder keeps the resources of each CreateTags call.
type tagRecorder struct {
	EC2API
	resources [][]string
}

func (r *tagRecorder) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	r.resources = append(r.resources, in.Resources)
	return r.EC2API.CreateTags(ctx, in, opts...)
}

// After launch only the instance is tagged: Karpenter's published policy
// allows ec2:CreateTags after creation on instance/* alone, so a call that
// also named the volumes and interfaces would be refused whole.
func TestTagNamesTheInstanceAlone(t *testing.T) {
	f := setup(t)
	rec := &tagRecorder{EC2API: f.ec2}
	p := New(Options{EC2: rec, ClusterName: "demo"})
	inst, err := p.Create(context.Background(), f.request("t", "m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Tag(context.Background(), inst, map[string]string{"karpenter.sh/nodeclaim": "default-abcde"}); err != nil {
		t.Fatal(err)
	}
	if len(rec.resources) != 1 || !reflect.DeepEqual(rec.resources[0], []string{inst.ID}) {
		t.Errorf("CreateTags on %v, want [[%s]]", rec.resources, inst.ID)
	}
}

// TestLaunchedFindsAnUnrecordedLaunch: after a restart, a NodeClaim whose
// launch was attempted finds the instance it started, tagged with its name
// or not yet tagged, and never one another NodeClaim has or this process
// handed out.
func TestLaunchedFindsAnUnrecordedLaunch(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)
	any := func(*Instance) bool { return true }
	before := New(Options{EC2: f.ec2, ClusterName: "demo"})
	first, err := before.Create(ctx, f.request("claim-a-uid", "m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := before.Launched(ctx, "claim-b", "default", since, any); err != nil || got != nil {
		t.Fatalf("the process that handed %s out offers it to another NodeClaim: %v %v", first.ID, got, err)
	}
	after := New(Options{EC2: f.ec2, ClusterName: "demo"}) // the restart
	for _, tc := range []struct {
		name   string
		claim  string
		since  time.Time
		fits   func(*Instance) bool
		wantID string
	}{
		{name: "an instance the NodeClaim could not run as", claim: "other", since: since, fits: func(*Instance) bool { return false }},
		{name: "an attempt after the instance's launch (and the slack)", claim: "late", since: time.Now().Add(time.Hour), fits: any},
		{name: "the untagged instance of an attempt that stopped before tagging", claim: "claim-a", since: since, fits: any, wantID: first.ID},
		{name: "once adopted, not offered again", claim: "claim-c", since: since, fits: any},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := after.Launched(ctx, tc.claim, "default", tc.since, tc.fits)
			if err != nil {
				t.Fatal(err)
			}
			if id := idOf(got); id != tc.wantID {
				t.Fatalf("found %q, want %q", id, tc.wantID)
			}
		})
	}
	if err := after.Tag(ctx, first, map[string]string{"karpenter.sh/nodeclaim": "claim-a"}); err != nil {
		t.Fatal(err)
	}
	again := New(Options{EC2: f.ec2, ClusterName: "demo"}) // another restart
	if got, _ := again.Launched(ctx, "claim-d", "default", since, any); got != nil {
		t.Errorf("an instance tagged with claim-a offered to claim-d: %s", got.ID)
	}
	if got, _ := again.Launched(ctx, "claim-a", "default", time.Now().Add(time.Hour), any); idOf(got) != first.ID {
		t.Errorf("claim-a does not find the instance tagged with its name: %v", got)
	}
}

func idOf(i *Instance) string {
	if i == nil {
		return ""
	}
	return i.ID
}

// TestLaunchedLeavesACallUnderWayAlone: while a fleet call runs (its
// answer late, or being retried) the instances it launched are in EC2
// untagged; a resumed launch asking meanwhile must not take them, or two
// NodeClaims would share one instance.
func TestLaunchedLeavesACallUnderWayAlone(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	ctr := &counting{EC2API: f.ec2, calls: map[string]int{}}
	p := New(Options{EC2: ctr, ClusterName: "demo"})
	var during *Instance
	var duringErr error
	ctr.fleet = func(in *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error) {
		out, err := f.ec2.CreateFleet(ctx, in)
		// The instances exist; the caller has not heard back yet.
		during, duringErr = p.Launched(ctx, "resumed", "default", time.Now().Add(-time.Minute), func(*Instance) bool { return true })
		return out, err
	}
	got, err := p.Create(ctx, f.request("first-uid", "m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	if duringErr != nil {
		t.Fatal(duringErr)
	}
	if during != nil {
		t.Fatalf("a resumed launch took %s while the call that launched it (for %s) was under way", during.ID, got.ID)
	}
}
