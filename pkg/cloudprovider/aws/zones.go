package aws

import (
	"slices"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
)

// ZonalShifts says which zone IDs an ARC zonal shift moves traffic away
// from now (package zonalshift).
type ZonalShifts interface{ Shifted() map[string]bool }

// byZoneID keeps the offerings in the zones whose IDs the pool's
// topology.k8s.aws/zone-id requirement allows. The planner knows zones,
// not zone IDs; without this it would plan onto zones the launch then
// refuses.
func byZoneID(np *v1.NodePool, nc *awsv1.EC2NodeClass, its []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error) {
	reqs, err := requirements.FromNodeSelectorRequirements(np.Spec.Template.Spec.Requirements...)
	if err != nil || reqs[LabelZoneID] == nil {
		return its, err
	}
	ids := zoneIDsOf(nc)
	out := make([]*cloudprovider.InstanceType, 0, len(its))
	for _, it := range its {
		cp := it.Copy()
		cp.Offerings = nil
		for _, o := range it.Offerings {
			if reqs.Allows(LabelZoneID, ids[o.Zone]) {
				cp.Offerings = append(cp.Offerings, o)
			}
		}
		if len(cp.Offerings) > 0 {
			out = append(out, cp)
		}
	}
	return out, nil
}

// zoneIDsOf maps the class's zones to their zone IDs (use1-az1), which
// name the same physical zone in every account.
func zoneIDsOf(nc *awsv1.EC2NodeClass) map[string]string {
	out := map[string]string{}
	for _, s := range nc.Status.Subnets {
		if s.ZoneID != "" {
			out[s.Zone] = s.ZoneID
		}
	}
	return out
}

// withoutShiftedZones makes the offerings in shifted zones (by zone ID)
// unavailable, copying only the types it changes.
func withoutShiftedZones(its []*cloudprovider.InstanceType, zoneIDs map[string]string, shifted map[string]bool) []*cloudprovider.InstanceType {
	if len(shifted) == 0 {
		return its
	}
	out := make([]*cloudprovider.InstanceType, len(its))
	for i, it := range its {
		out[i] = it
		for j, o := range it.Offerings {
			if !o.Available || !shifted[zoneIDs[o.Zone]] {
				continue
			}
			if out[i] == it {
				out[i] = it.Copy()
				out[i].Offerings = slices.Clone(it.Offerings)
			}
			out[i].Offerings[j].Available = false
		}
	}
	return out
}
