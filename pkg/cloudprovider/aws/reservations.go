package aws

import (
	"context"
	"slices"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/capacityreservation"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
)

// reservedPriceFactor prices a reserved offering at a millionth of its
// type's on-demand price: the reservation is paid for whether used or not,
// so the planner prefers it to anything else, and among reservations the
// type that would cost least on demand.
const reservedPriceFactor = 1e-6

// withReservations adds a "reserved" offering to each type for each zone
// where one of the class's reservations has room. The types are copied:
// the instance type provider's lists are shared.
func (c *CloudProvider) withReservations(nc *awsv1.EC2NodeClass, its []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	if c.opts.CapacityReservations == nil || len(nc.Status.CapacityReservations) == 0 {
		return its
	}
	now := c.opts.Clock.Now()
	room := map[string]map[string]bool{} // type → zone → room left
	for _, r := range nc.Status.CapacityReservations {
		if capacityreservation.Expiring(r, now) || c.opts.CapacityReservations.Available(r.ID) <= 0 {
			continue
		}
		if room[r.InstanceType] == nil {
			room[r.InstanceType] = map[string]bool{}
		}
		room[r.InstanceType][r.AvailabilityZone] = true
	}
	out := make([]*cloudprovider.InstanceType, len(its))
	for i, it := range its {
		out[i] = it
		zones := room[it.Name]
		if len(zones) == 0 {
			continue
		}
		cp := it.Copy()
		cp.Offerings = slices.Clone(it.Offerings)
		for _, o := range it.Offerings {
			if o.CapacityType == instance.CapacityTypeOnDemand && zones[o.Zone] {
				cp.Offerings = append(cp.Offerings, cloudprovider.Offering{Zone: o.Zone, CapacityType: v1.CapacityTypeReserved, Price: o.Price * reservedPriceFactor, Available: true})
			}
		}
		out[i] = cp
	}
	return out
}

// reserved labels a NodeClaim launched into a reservation as Karpenter
// does, and counts the room it took.
func (c *CloudProvider) reserved(out *v1.NodeClaim, nc *awsv1.EC2NodeClass, id string) {
	out.Labels[v1.LabelCapacityType] = v1.CapacityTypeReserved
	out.Labels[capacityreservation.LabelID] = id
	for _, r := range nc.Status.CapacityReservations {
		if r.ID == id {
			out.Labels[capacityreservation.LabelType] = r.ReservationType
			out.Labels[capacityreservation.LabelInterruptible] = strconv.FormatBool(r.Interruptible)
		}
	}
	if c.opts.CapacityReservations != nil {
		c.opts.CapacityReservations.Launched(id)
	}
}

// reservationsFor are the class's reservations with room for the type in
// the zone, default reservations before Capacity Blocks.
func (c *CloudProvider) reservationsFor(nc *awsv1.EC2NodeClass, typ, zone string) []awsv1.CapacityReservation {
	var out []awsv1.CapacityReservation
	for _, r := range nc.Status.CapacityReservations {
		if r.InstanceType == typ && r.AvailabilityZone == zone && !capacityreservation.Expiring(r, c.opts.Clock.Now()) && c.opts.CapacityReservations.Available(r.ID) > 0 {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return blockRank(out[i]) < blockRank(out[j]) })
	return out
}

// blockRank orders default reservations before Capacity Blocks.
func blockRank(r awsv1.CapacityReservation) int {
	if r.ReservationType == "capacity-block" {
		return 1
	}
	return 0
}

// reservedRequest is the fleet request into the class's reservations: one
// override per reservation with room, each from a template that targets it.
// EC2 fills a targeted reservation as an on-demand launch (a Capacity
// Block as its own market), so the fleet's capacity type is that, while the
// NodeClaim says reserved. One kind per request: default reservations when
// any has room, else Capacity Blocks, and of those one alone, the cheapest
// (as Karpenter launches them): EC2 may refuse a fleet of several blocks.
func (c *CloudProvider) reservedRequest(ctx context.Context, nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim, reqs requirements.Requirements,
	its []*cloudprovider.InstanceType) (instance.Request, map[string]string, []string, error) {
	zoneIDs := zoneIDsOf(nc)
	type pick struct {
		it *cloudprovider.InstanceType
		o  cloudprovider.Offering
		r  awsv1.CapacityReservation
	}
	var picks []pick
	kind := ""
	for _, it := range its {
		for _, o := range it.Offerings {
			if !o.Available || o.CapacityType != v1.CapacityTypeReserved || !reqs.Allows(corev1.LabelTopologyZone, o.Zone) || !reqs.Allows(LabelZoneID, zoneIDs[o.Zone]) {
				continue
			}
			for _, r := range c.reservationsFor(nc, it.Name, o.Zone) {
				// A NodeClaim may ask for a reservation by its id, type or
				// interruptibility, as Karpenter's reserved offerings carry
				// them as requirements.
				if !reqs.Allows(capacityreservation.LabelID, r.ID) || !reqs.Allows(capacityreservation.LabelType, r.ReservationType) ||
					!reqs.Allows(capacityreservation.LabelInterruptible, strconv.FormatBool(r.Interruptible)) {
					continue
				}
				picks = append(picks, pick{it, o, r})
				if kind == "" || blockRank(r) < blockRank(awsv1.CapacityReservation{ReservationType: kind}) {
					kind = r.ReservationType
				}
			}
		}
	}
	req := instance.Request{CapacityType: instance.CapacityTypeOnDemand, Tags: c.launchTags(nc, nodeClaim), Token: string(nodeClaim.UID), Context: aws.ToString(nc.Spec.Context)}
	if kind == "capacity-block" {
		req.CapacityType = "capacity-block"
	}
	templates := map[string]string{}
	var zones []string
	if kind == "capacity-block" {
		sort.SliceStable(picks, func(i, j int) bool { return picks[i].o.Price < picks[j].o.Price })
	}
	for _, p := range picks {
		if p.r.ReservationType != kind {
			continue
		}
		if kind == "capacity-block" && len(req.Overrides) > 0 {
			break
		}
		lt, err := c.opts.LaunchTemplates.ForReservation(ctx, nc, nodeClaim, p.it, p.r)
		if err != nil {
			return instance.Request{}, nil, nil, err
		}
		if lt == "" {
			continue // no AMI of the class fits the type
		}
		subnets, err := c.opts.Subnets.ZonalForLaunch(ctx, nc, []string{p.o.Zone})
		if err != nil {
			return instance.Request{}, nil, nil, err
		}
		if s := aws.ToString(subnets[p.o.Zone].SubnetId); s != "" {
			templates[p.it.Name] = lt
			req.Overrides = append(req.Overrides, instance.Override{LaunchTemplate: lt, InstanceType: p.it.Name, SubnetID: s, Zone: p.o.Zone, ZoneID: zoneIDs[p.o.Zone], Price: p.o.Price})
			if !slices.Contains(zones, p.o.Zone) {
				zones = append(zones, p.o.Zone)
			}
		}
	}
	sort.Strings(zones)
	return req, templates, zones, nil
}
