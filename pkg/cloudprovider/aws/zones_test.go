package aws

import (
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

// A zonal shift takes every offering of its zone (by zone ID) out, and
// leaves the input alone: the instance type provider's lists are shared.
func TestWithoutShiftedZones(t *testing.T) {
	mk := func() []*cloudprovider.InstanceType {
		return []*cloudprovider.InstanceType{{Name: "m5.large", Offerings: []cloudprovider.Offering{
			{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096, Available: true},
			{Zone: "us-east-1a", CapacityType: "spot", Price: 0.04, Available: true},
			{Zone: "us-east-1b", CapacityType: "on-demand", Price: 0.096, Available: true},
			{Zone: "us-east-1c", CapacityType: "on-demand", Price: 0.096, Available: false},
		}}}
	}
	ids := map[string]string{"us-east-1a": "use1-az1", "us-east-1b": "use1-az2", "us-east-1c": "use1-az4"}
	cases := []struct {
		name    string
		shifted map[string]bool
		// available lists the zones still offered, per offering in order.
		available []bool
	}{
		{"no shift", nil, []bool{true, true, true, false}},
		{"away from us-east-1a's ID", map[string]bool{"use1-az1": true}, []bool{false, false, true, false}},
		{"a zone name is not an ID", map[string]bool{"us-east-1b": true}, []bool{true, true, true, false}},
		{"a zone the class has no subnet in", map[string]bool{"use1-az6": true}, []bool{true, true, true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := mk()
			out := withoutShiftedZones(in, ids, tc.shifted)
			for i, o := range out[0].Offerings {
				if o.Available != tc.available[i] {
					t.Errorf("offering %s/%s available %v, want %v", o.Zone, o.CapacityType, o.Available, tc.available[i])
				}
			}
			if !in[0].Offerings[0].Available {
				t.Error("the input was changed")
			}
		})
	}
}
