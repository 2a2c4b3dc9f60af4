package securitygroup_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/internal/mototest"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/securitygroup"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/selector"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }

func TestList(t *testing.T) {
	mototest.Current().Reset(t)
	ctx := context.Background()
	clients := mototest.Clients(t, "")
	vpc, err := clients.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, g := range []struct {
		name string
		tags map[string]string
	}{
		{"nodes", map[string]string{"karpenter.sh/discovery": "demo", "role": "node"}},
		{"extra", map[string]string{"karpenter.sh/discovery": "demo"}},
		{"other", map[string]string{"karpenter.sh/discovery": "other", "Name": "nodes-tagged"}},
	} {
		var ts []ec2types.Tag
		for k, v := range g.tags {
			ts = append(ts, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		out, err := clients.EC2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(g.name), Description: aws.String(g.name),
			VpcId: vpc.Vpc.VpcId, TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: ts}}})
		if err != nil {
			t.Fatal(err)
		}
		ids[g.name] = aws.ToString(out.GroupId)
	}
	cases := []struct {
		name    string
		terms   []awsv1.SecurityGroupSelectorTerm
		want    []string
		noMatch []string
	}{
		{name: "by tag", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}}, want: []string{"nodes", "extra"}},
		{name: "tags in a term are ANDed", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo", "role": "node"}}}, want: []string{"nodes"}},
		{name: "a star value means the key exists", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"role": "*"}}}, want: []string{"nodes"}},
		{name: "by id", terms: []awsv1.SecurityGroupSelectorTerm{{ID: ids["other"]}}, want: []string{"other"}},
		// The group name, not the Name tag: "other" is tagged Name=nodes-tagged.
		{name: "by group name", terms: []awsv1.SecurityGroupSelectorTerm{{Name: "nodes"}}, want: []string{"nodes"}},
		{name: "not by Name tag", terms: []awsv1.SecurityGroupSelectorTerm{{Name: "nodes-tagged"}}, noMatch: []string{"securityGroupSelectorTerms[0] {name: nodes-tagged}"}},
		{name: "terms are ORed", terms: []awsv1.SecurityGroupSelectorTerm{{Name: "extra"}, {ID: ids["other"]}}, want: []string{"extra", "other"}},
		{name: "no match names every term", terms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "nope"}}, {ID: "sg-00000000"}},
			noMatch: []string{"SecurityGroupSelector did not match any SecurityGroups", "securityGroupSelectorTerms[0] {tags: karpenter.sh/discovery=nope}", "securityGroupSelectorTerms[1] {id: sg-00000000}"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := securitygroup.NewProvider(clients.EC2, clocktesting.NewFakeClock(time.Now()), 0)
			nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{SecurityGroupSelectorTerms: tc.terms}}
			got, err := p.List(ctx, nc)
			if tc.noMatch != nil {
				var nm *selector.NoMatchError
				if !errors.As(err, &nm) || nm.Reason() != "SecurityGroupsNotFound" {
					t.Fatalf("want a SecurityGroupsNotFound NoMatchError, got %v (%v)", err, got)
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
			var want []awsv1.SecurityGroup
			for _, n := range tc.want {
				want = append(want, awsv1.SecurityGroup{ID: ids[n], Name: n})
			}
			sort.Slice(want, func(i, j int) bool { return want[i].ID < want[j].ID })
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// Groups are described once per TTL.
func TestListCachesForTTL(t *testing.T) {
	mototest.Current().Reset(t)
	ctx := context.Background()
	clients := mototest.Clients(t, "")
	clk := clocktesting.NewFakeClock(time.Now())
	p := securitygroup.NewProvider(clients.EC2, clk, time.Minute)
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Name: "default"}}}}
	if _, err := p.List(ctx, nc); err != nil {
		t.Fatal(err)
	}
	calls := mototest.Current().Calls("ec2", "DescribeSecurityGroups")
	if _, err := p.List(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if n := mototest.Current().Calls("ec2", "DescribeSecurityGroups"); n != calls {
		t.Errorf("described again within the TTL: %d calls, want %d", n, calls)
	}
	clk.Step(time.Minute)
	if _, err := p.List(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if n := mototest.Current().Calls("ec2", "DescribeSecurityGroups"); n == calls {
		t.Error("not described again after the TTL")
	}
}
