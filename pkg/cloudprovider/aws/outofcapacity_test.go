package aws

import (
	"reflect"
	"slices"
	"testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
)

// TestOutOfCapacityInAPlacementGroup: EC2's capacity errors on a launch
// into the class's placement group take the offering out for that group
// alone; a spread group's limit in a zone takes every type of the launch
// out of the zone for the group. Outside a group, the offering is out for
// every launch.
func TestOutOfCapacityInAPlacementGroup(t *testing.T) {
	large := instance.Offering{InstanceType: "m5.large", Zone: zoneA, CapacityType: onDemand}
	spreadFull := large
	spreadFull.SpreadLimit = true
	for _, tc := range []struct {
		name        string
		group       *placementgroup.Group
		out         instance.Offering
		wantGlobal  []instance.Offering
		wantInGroup []string // types marked out in zone A for pg-1
	}{
		{name: "no placement group", out: large, wantGlobal: []instance.Offering{large}},
		{name: "in a cluster group", group: &placementgroup.Group{ID: "pg-1", Strategy: "cluster"}, out: large, wantInGroup: []string{"m5.large"}},
		{name: "a spread group full in the zone", group: &placementgroup.Group{ID: "pg-1", Strategy: "spread"}, out: spreadFull,
			wantInGroup: []string{"m5.large", "m5.xlarge", "m6g.large"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, placementGroup: tc.group,
				instances: &fakeInstances{createErr: &instance.InsufficientCapacityError{Offerings: []instance.Offering{tc.out}, Message: "InsufficientInstanceCapacity"}}}
			class := readyClass()
			if tc.group != nil {
				class.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: "training"}
			}
			p := newProvider(t, kubeWith(t, class), f)
			if _, _, err := createStepping(t, p, f, nodeClaim()); err == nil {
				t.Fatal("Create succeeded")
			}
			if !reflect.DeepEqual(f.unavailable.marked, tc.wantGlobal) {
				t.Errorf("out for every launch: %v, want %v", f.unavailable.marked, tc.wantGlobal)
			}
			var inGroup []string
			for group, offerings := range f.unavailable.inGroup {
				for _, o := range offerings {
					if group != "pg-1" || o.Zone != zoneA || o.CapacityType != onDemand {
						t.Errorf("out in group %s: %+v", group, o)
					}
					inGroup = append(inGroup, o.InstanceType)
				}
			}
			slices.Sort(inGroup)
			if !slices.Equal(inGroup, tc.wantInGroup) {
				t.Errorf("out in pg-1: %v, want %v", inGroup, tc.wantInGroup)
			}
		})
	}
}
