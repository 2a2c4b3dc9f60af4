package aws

import (
	"reflect"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
)

// A launch that EC2 fell through to, past offerings it had no capacity for,
// marks those unavailable just as a failed launch does: otherwise the next
// launch, and consolidation's cheaper replacement, ask for them again.
func TestCreateMarksTheOfferingsTheFleetFellThrough(t *testing.T) {
	outOf := []instance.Offering{{InstanceType: "m5.large", Zone: zoneA, CapacityType: spot}, {InstanceType: "m5.large", Zone: zoneB, CapacityType: spot}}
	for _, tc := range []struct {
		name string
		out  []instance.Offering
	}{
		{"nothing out of capacity", nil},
		{"the cheapest out in both zones", outOf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{outOfCapacity: tc.out}}
			p := newProvider(t, kubeWith(t, readyClass()), f)
			if _, _, err := createStepping(t, p, f, nodeClaim()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.unavailable.marked, tc.out) {
				t.Errorf("marked unavailable %v, want %v", f.unavailable.marked, tc.out)
			}
		})
	}
}
