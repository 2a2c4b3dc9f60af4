package subnet_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/internal/mototest"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/selector"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/subnet"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }

// world is a VPC with four subnets:
//
//	a1 us-east-1a /24 (251 free)  discovery=demo, tier=private
//	a2 us-east-1a /25 (123 free)  discovery=demo
//	b1 us-east-1b /26 (59 free)   discovery=demo, tier=private
//	c1 us-east-1c /23 (507 free)  discovery=other
type world struct {
	ec2 *ec2.Client
	ids map[string]string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	mototest.Current().Reset(t)
	ctx := context.Background()
	clients := mototest.Clients(t, "")
	w := &world{ec2: clients.EC2, ids: map[string]string{}}
	vpc, err := w.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name, zone, cidr string
		tags             map[string]string
	}{
		{"a1", "us-east-1a", "10.0.1.0/24", map[string]string{"karpenter.sh/discovery": "demo", "tier": "private"}},
		{"a2", "us-east-1a", "10.0.2.0/25", map[string]string{"karpenter.sh/discovery": "demo"}},
		{"b1", "us-east-1b", "10.0.3.0/26", map[string]string{"karpenter.sh/discovery": "demo", "tier": "private"}},
		{"c1", "us-east-1c", "10.0.4.0/23", map[string]string{"karpenter.sh/discovery": "other"}},
	} {
		w.ids[s.name] = w.createSubnet(t, aws.ToString(vpc.Vpc.VpcId), s.zone, s.cidr, s.tags)
	}
	return w
}

func (w *world) createSubnet(t *testing.T, vpc, zone, cidr string, tags map[string]string) string {
	t.Helper()
	var ts []ec2types.Tag
	for k, v := range tags {
		ts = append(ts, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	out, err := w.ec2.CreateSubnet(context.Background(), &ec2.CreateSubnetInput{VpcId: aws.String(vpc), AvailabilityZone: aws.String(zone),
		CidrBlock: aws.String(cidr), TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: ts}}})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.Subnet.SubnetId)
}

func class(terms ...awsv1.SubnetSelectorTerm) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{SubnetSelectorTerms: terms}}
}

func TestList(t *testing.T) {
	w := newWorld(t)
	cases := []struct {
		name  string
		terms func() []awsv1.SubnetSelectorTerm
		// want is the subnet names in the expected order (most free IPs, then id).
		want []string
		// noMatch lists what the error must name when nothing matches.
		noMatch []string
	}{
		{name: "by tag", terms: func() []awsv1.SubnetSelectorTerm {
			return []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}}
		}, want: []string{"a1", "a2", "b1"}},
		{name: "fields in a term are ANDed", terms: func() []awsv1.SubnetSelectorTerm {
			return []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo", "tier": "private"}}}
		}, want: []string{"a1", "b1"}},
		{name: "terms are ORed", terms: func() []awsv1.SubnetSelectorTerm {
			return []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"tier": "private"}}, {ID: w.ids["c1"]}}
		}, want: []string{"c1", "a1", "b1"}},
		{name: "a star value means the key exists", terms: func() []awsv1.SubnetSelectorTerm {
			return []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "*"}}}
		}, want: []string{"c1", "a1", "a2", "b1"}},
		{name: "by id", terms: func() []awsv1.SubnetSelectorTerm {
			return []awsv1.SubnetSelectorTerm{{ID: w.ids["b1"]}}
		}, want: []string{"b1"}},
		{name: "a term matching nothing beside one that matches is no error", terms: func() []awsv1.SubnetSelectorTerm {
			return []awsv1.SubnetSelectorTerm{{ID: "subnet-0000000000"}, {ID: w.ids["b1"]}}
		}, want: []string{"b1"}},
		{name: "no match names the terms", terms: func() []awsv1.SubnetSelectorTerm {
			return []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "nope"}}, {ID: "subnet-0000000000"}}
		}, noMatch: []string{"SubnetSelector did not match any Subnets", "subnetSelectorTerms[0] {tags: karpenter.sh/discovery=nope}", "subnetSelectorTerms[1] {id: subnet-0000000000}"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := subnet.NewProvider(w.ec2, clocktesting.NewFakeClock(time.Now()), 0)
			got, err := p.List(context.Background(), class(tc.terms()...))
			if tc.noMatch != nil {
				var nm *selector.NoMatchError
				if !errors.As(err, &nm) || nm.Reason() != "SubnetsNotFound" {
					t.Fatalf("want a SubnetsNotFound NoMatchError, got %v (%d subnets)", err, len(got))
				}
				for _, s := range tc.noMatch {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if names := w.names(got); !reflect.DeepEqual(names, tc.want) {
				t.Errorf("got %v, want %v", names, tc.want)
			}
		})
	}
}

func (w *world) names(subnets []ec2types.Subnet) []string {
	byID := map[string]string{}
	for n, id := range w.ids {
		byID[id] = n
	}
	var out []string
	for _, s := range subnets {
		out = append(out, byID[aws.ToString(s.SubnetId)])
	}
	return out
}

// The status form carries zone and zone ID and keeps the launch order.
func TestToStatus(t *testing.T) {
	w := newWorld(t)
	p := subnet.NewProvider(w.ec2, clocktesting.NewFakeClock(time.Now()), 0)
	got, err := p.List(context.Background(), class(awsv1.SubnetSelectorTerm{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}))
	if err != nil {
		t.Fatal(err)
	}
	// Reverse, so the order must come from ToStatus itself.
	for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
		got[i], got[j] = got[j], got[i]
	}
	status := subnet.ToStatus(got)
	var ids, zones []string
	for _, s := range status {
		if s.ZoneID == "" {
			t.Errorf("subnet %s has no zone ID", s.ID)
		}
		ids, zones = append(ids, s.ID), append(zones, s.Zone)
	}
	if want := []string{w.ids["a1"], w.ids["a2"], w.ids["b1"]}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	if want := []string{"us-east-1a", "us-east-1a", "us-east-1b"}; !reflect.DeepEqual(zones, want) {
		t.Errorf("zones %v, want %v", zones, want)
	}
}

// Subnets are described once per TTL, and a new subnet shows after it.
func TestListCachesForTTL(t *testing.T) {
	w := newWorld(t)
	clk := clocktesting.NewFakeClock(time.Now())
	p := subnet.NewProvider(w.ec2, clk, time.Minute)
	nc := class(awsv1.SubnetSelectorTerm{Tags: map[string]string{"tier": "private"}})
	ctx := context.Background()
	if _, err := p.List(ctx, nc); err != nil {
		t.Fatal(err)
	}
	calls := mototest.Current().Calls("ec2", "DescribeSubnets")
	vpcs, err := w.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{{Name: aws.String("cidr"), Values: []string{"10.0.0.0/16"}}}})
	if err != nil || len(vpcs.Vpcs) != 1 {
		t.Fatalf("vpc: %v %d", err, len(vpcs.Vpcs))
	}
	w.ids["d1"] = w.createSubnet(t, aws.ToString(vpcs.Vpcs[0].VpcId), "us-east-1d", "10.0.6.0/25", map[string]string{"tier": "private"})
	got, err := p.List(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if n := mototest.Current().Calls("ec2", "DescribeSubnets"); n != calls {
		t.Errorf("a second List within the TTL described subnets again (%d calls, want %d)", n, calls)
	}
	if names := w.names(got); !reflect.DeepEqual(names, []string{"a1", "b1"}) {
		t.Errorf("within the TTL got %v", names)
	}
	clk.Step(time.Minute)
	got, err = p.List(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if names := w.names(got); !reflect.DeepEqual(names, []string{"a1", "d1", "b1"}) {
		t.Errorf("after the TTL got %v, want the new subnet d1 too", names)
	}
}

func TestZonalForLaunch(t *testing.T) {
	w := newWorld(t)
	demo := class(awsv1.SubnetSelectorTerm{Tags: map[string]string{"karpenter.sh/discovery": "demo"}})
	cases := []struct {
		name  string
		zones []string
		// inflight are the IPs reported taken before the pick, by subnet name.
		inflight map[string]int
		want     map[string]string
		wantErr  string
	}{
		{name: "most free IPs per zone", want: map[string]string{"us-east-1a": "a1", "us-east-1b": "b1"}},
		{name: "only the zones asked", zones: []string{"us-east-1b", "us-east-1c"}, want: map[string]string{"us-east-1b": "b1"}},
		{name: "in-flight launches move the next one", inflight: map[string]int{"a1": 200}, want: map[string]string{"us-east-1a": "a2", "us-east-1b": "b1"}},
		{name: "in-flight IPs add up", inflight: map[string]int{"a1": 100}, want: map[string]string{"us-east-1a": "a1", "us-east-1b": "b1"}},
		{name: "no subnet in the zones", zones: []string{"us-east-1c"}, wantErr: "no subnet with free IPs in zones [us-east-1c]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := subnet.NewProvider(w.ec2, clocktesting.NewFakeClock(time.Now()), 0)
			ctx := context.Background()
			if _, err := p.ZonalForLaunch(ctx, demo, nil); err != nil {
				t.Fatal(err)
			}
			taken := map[string]int{}
			for n, ips := range tc.inflight {
				taken[w.ids[n]] = ips
			}
			p.UpdateInflightIPs(taken)
			got, err := p.ZonalForLaunch(ctx, demo, tc.zones)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]string{}
			for zone, s := range got {
				names[zone] = w.names([]ec2types.Subnet{s})[0]
			}
			if !reflect.DeepEqual(names, tc.want) {
				t.Errorf("got %v, want %v", names, tc.want)
			}
		})
	}
}

// Back-to-back launches that report their IPs spread over a zone's
// subnets, and a fresh description, which counts them itself, resets the
// tally.
func TestZonalForLaunchSpreadsBackToBackLaunches(t *testing.T) {
	w := newWorld(t)
	clk := clocktesting.NewFakeClock(time.Now())
	p := subnet.NewProvider(w.ec2, clk, time.Minute)
	ctx := context.Background()
	nc := class(awsv1.SubnetSelectorTerm{Tags: map[string]string{"karpenter.sh/discovery": "demo"}})
	var picks []string
	for i := 0; i < 4; i++ {
		got, err := p.ZonalForLaunch(ctx, nc, []string{"us-east-1a"})
		if err != nil {
			t.Fatal(err)
		}
		s := got["us-east-1a"]
		picks = append(picks, w.names([]ec2types.Subnet{s})[0])
		p.UpdateInflightIPs(map[string]int{aws.ToString(s.SubnetId): 64})
	}
	// a1 251 -> 187 -> 123 (tie with a2, a2's id may sort first) ...
	count := map[string]int{}
	for _, n := range picks {
		count[n]++
	}
	if count["a1"] == 0 || count["a2"] == 0 {
		t.Errorf("launches did not spread: %v", picks)
	}
	if picks[0] != "a1" || picks[1] != "a1" {
		t.Errorf("first two launches should take a1 (251 then 187 free): %v", picks)
	}
	clk.Step(time.Minute)
	got, err := p.ZonalForLaunch(ctx, nc, []string{"us-east-1a"})
	if err != nil {
		t.Fatal(err)
	}
	if n := w.names([]ec2types.Subnet{got["us-east-1a"]})[0]; n != "a1" {
		t.Errorf("after a fresh description the pick is %s, want a1 (moto's counts did not change)", n)
	}
}
