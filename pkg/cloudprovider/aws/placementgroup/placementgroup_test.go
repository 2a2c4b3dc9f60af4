package placementgroup

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

type fakeEC2 struct {
	groups []ec2types.PlacementGroup
	err    error
	calls  int
	last   *ec2.DescribePlacementGroupsInput
}

func (f *fakeEC2) DescribePlacementGroups(_ context.Context, in *ec2.DescribePlacementGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error) {
	f.calls++
	f.last = in
	if f.err != nil {
		return nil, f.err
	}
	return &ec2.DescribePlacementGroupsOutput{PlacementGroups: f.groups}, nil
}

func class(sel *awsv1.PlacementGroupSelector) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "default"
	nc.Spec.PlacementGroupSelector = sel
	return nc
}

func TestGet(t *testing.T) {
	available := ec2types.PlacementGroup{GroupId: aws.String("pg-0a"), GroupName: aws.String("training"), Strategy: ec2types.PlacementStrategyPartition,
		PartitionCount: aws.Int32(3), State: ec2types.PlacementGroupStateAvailable}
	deleting := available
	deleting.State = ec2types.PlacementGroupStateDeleting
	tests := []struct {
		name     string
		sel      *awsv1.PlacementGroupSelector
		ec2      *fakeEC2
		want     *Group
		notFound bool
		err      bool
		byID     bool
	}{
		{name: "no selector, no call", ec2: &fakeEC2{}},
		{name: "by name", sel: &awsv1.PlacementGroupSelector{Name: "training"}, ec2: &fakeEC2{groups: []ec2types.PlacementGroup{available}},
			want: &Group{ID: "pg-0a", Name: "training", Strategy: "partition", Partitions: 3}},
		{name: "by id", sel: &awsv1.PlacementGroupSelector{ID: "pg-0a"}, ec2: &fakeEC2{groups: []ec2types.PlacementGroup{available}},
			want: &Group{ID: "pg-0a", Name: "training", Strategy: "partition", Partitions: 3}, byID: true},
		{name: "EC2 does not know the name", sel: &awsv1.PlacementGroupSelector{Name: "gone"},
			ec2: &fakeEC2{err: &smithy.GenericAPIError{Code: "InvalidPlacementGroup.Unknown", Message: "The Placement Group 'gone' is unknown."}}, notFound: true},
		{name: "a group being deleted", sel: &awsv1.PlacementGroupSelector{Name: "training"}, ec2: &fakeEC2{groups: []ec2types.PlacementGroup{deleting}}, notFound: true},
		{name: "refused", sel: &awsv1.PlacementGroupSelector{Name: "training"},
			ec2: &fakeEC2{err: &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "not authorized"}}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewProvider(tt.ec2, clocktesting.NewFakePassiveClock(time.Now()), 0)
			got, err := p.Get(context.Background(), class(tt.sel))
			var nf *NotFoundError
			switch {
			case tt.notFound:
				if !errors.As(err, &nf) || nf.Reason() != "PlacementGroupNotFound" {
					t.Fatalf("error %v, want a PlacementGroupNotFound", err)
				}
				return
			case tt.err:
				if err == nil || errors.As(err, &nf) {
					t.Fatalf("error %v, want an AWS error to retry", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if tt.sel == nil && tt.ec2.calls != 0 {
				t.Fatalf("%d calls for a class without a selector", tt.ec2.calls)
			}
			if tt.byID && (len(tt.ec2.last.GroupIds) != 1 || len(tt.ec2.last.GroupNames) != 0) {
				t.Fatalf("asked %+v; want the id", tt.ec2.last)
			}
			if tt.sel != nil {
				// The second call is the cache's.
				if _, err := p.Get(context.Background(), class(tt.sel)); err != nil || tt.ec2.calls != 1 {
					t.Fatalf("second Get: %v, %d calls", err, tt.ec2.calls)
				}
			}
		})
	}
}
