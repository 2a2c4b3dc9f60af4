// Package aws is the CloudProvider that launches EC2 instances for
// NodeClaims, from an EC2NodeClass's subnets, security groups, AMIs and
// instance profile as its controller has resolved them into status.
//
// The work is split by concern into the packages beside this one; this file
// only decides which offerings a NodeClaim may launch into and turns
// instances into NodeClaims and back.
package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Name is what the provider calls itself in logs and metrics.
const Name = "aws"

// Drift reasons, as Karpenter reports them.
const (
	ReasonAMIDrift            = "AMIDrift"
	ReasonSubnetDrift         = "SubnetDrift"
	ReasonSecurityGroupDrift  = "SecurityGroupDrift"
	ReasonPlacementGroupDrift = "PlacementGroupDrift"
	// ReasonCapacityReservationDrift: the node runs in a reservation its
	// class no longer selects.
	ReasonCapacityReservationDrift = "CapacityReservationDrift"
)

// InstanceTypes lists the instance types a class can launch, priced, with
// offerings in the class's zones.
type InstanceTypes interface {
	List(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*cloudprovider.InstanceType, error)
}

// Instances launches and finds instances.
type Instances interface {
	Create(ctx context.Context, req instance.Request) (*instance.Instance, error)
	Get(ctx context.Context, id string) (*instance.Instance, error)
	// Recent is Get that may answer with a description made at most maxAge
	// ago.
	Recent(ctx context.Context, id string, maxAge time.Duration) (*instance.Instance, error)
	List(ctx context.Context) ([]*instance.Instance, error)
	Delete(ctx context.Context, id string) error
	// Terminate terminates without describing first.
	Terminate(ctx context.Context, id string) error
	Tag(ctx context.Context, inst *instance.Instance, tags map[string]string) error
	// Launched finds what an unrecorded earlier attempt of the NodeClaim's
	// launch started (instance.Provider.Launched).
	Launched(ctx context.Context, claim, nodePool string, since time.Time, fits func(*instance.Instance) bool) (*instance.Instance, error)
}

// Subnets chooses the subnet of each zone for a launch.
type Subnets interface {
	ZonalForLaunch(ctx context.Context, nc *awsv1.EC2NodeClass, zones []string) (map[string]ec2types.Subnet, error)
	// UpdateInflightIPs counts addresses taken by launches that
	// DescribeSubnets does not show yet, so back-to-back launches spread.
	UpdateInflightIPs(ips map[string]int)
}

// Unavailable remembers offerings EC2 had no capacity for.
type Unavailable interface {
	MarkUnavailable(instanceType, zone, capacityType, reason string)
	// MarkUnavailableIn holds for launches into one placement group alone
	// (every launch when group is "").
	MarkUnavailableIn(group, instanceType, zone, capacityType, reason string)
	MarkCapacityTypeUnavailable(capacityType, reason string)
}

// LaunchTemplates returns, for each instance type of a launch, the launch
// template (AMI and user data) it boots with.
type LaunchTemplates interface {
	ForLaunch(ctx context.Context, nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim, its []*cloudprovider.InstanceType, capacityType string) (map[string]string, error)
	// ForReservation is the template that targets the reservation.
	ForReservation(ctx context.Context, nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim, it *cloudprovider.InstanceType, r awsv1.CapacityReservation) (string, error)
	// Forget drops templates a launch found gone.
	Forget(names []string)
}

// ReservationCounter tracks how many more instances each reservation takes.
type ReservationCounter interface {
	Available(id string) int32
	Launched(id string)
	Exhausted(id string)
	// Returned gives back the room of an instance that left the
	// reservation (terminated).
	Returned(id string)
}

// Options wire the provider.
type Options struct {
	ClusterName     string
	Region          string
	NodeClasses     client.Reader
	InstanceTypes   InstanceTypes
	Instances       Instances
	Subnets         Subnets
	Unavailable     Unavailable
	LaunchTemplates LaunchTemplates
	// PlacementGroups resolves classes' placement groups for drift; nil
	// judges no placement-group drift.
	PlacementGroups PlacementGroupGetter
	// CapacityReservations keeps count of the reservations' room; nil
	// plans and launches none (the ReservedCapacity gate off).
	CapacityReservations ReservationCounter
	Clock                clock.Clock
	// TagRetry bounds how long Create waits for a new instance to show in
	// DescribeInstances (EC2 is eventually consistent) before it gives up
	// tagging it with its NodeClaim; the garbage collector's grace period
	// must be longer. Default 30s.
	TagRetry time.Duration
	// DriftMaxAge is how old an instance's description may be when drift
	// judges its subnet and security groups. Above the garbage collector's
	// interval (30s), the periodic drift checks read what its List
	// described. Default 1m.
	DriftMaxAge time.Duration
	// ZonalShifts, when set (ENABLE_ZONAL_SHIFT), gives the zone IDs an
	// ARC zonal shift moves away from; their offerings are unavailable.
	ZonalShifts ZonalShifts
	// Overlay, when set, reprices and resizes the types a NodePool launches
	// (NodeOverlays), so the fleet prefers what the plan priced lowest and
	// the NodeClaim reports the overlaid capacity.
	Overlay cloudprovider.TypeOverlay
	// Capacity, when set, learns types' memory from registered nodes
	// (ObserveCapacity).
	Capacity MemoryObserver
	// Commitments, when set, are the account's RIs and Savings Plans,
	// offered to the planner at the bill's prices (withCommitments).
	Commitments CommitmentReader
}

// CloudProvider launches EC2 instances.
type CloudProvider struct{ opts Options }

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// New checks the wiring.
func New(opts Options) (*CloudProvider, error) {
	if opts.ClusterName == "" || opts.NodeClasses == nil || opts.InstanceTypes == nil || opts.Instances == nil ||
		opts.Subnets == nil || opts.Unavailable == nil || opts.LaunchTemplates == nil {
		return nil, errors.New("aws cloud provider: incomplete wiring (cluster name, node classes, instance types, instances, subnets, unavailable offerings and launch templates are all needed)")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.TagRetry == 0 {
		opts.TagRetry = 30 * time.Second
	}
	if opts.DriftMaxAge == 0 {
		opts.DriftMaxAge = time.Minute
	}
	return &CloudProvider{opts: opts}, nil
}

// Name implements cloudprovider.CloudProvider.
func (c *CloudProvider) Name() string { return Name }

// InstanceTypes returns the types of the pool's EC2NodeClass. A pool whose
// class is missing or not ready has none, so nothing is planned onto it.
// A refused DescribeInstanceTypes or DescribeInstanceTypeOfferings names
// the IAM action to allow: it stops every launch, and the provisioner
// passes the message on to the pods that wait.
func (c *CloudProvider) InstanceTypes(ctx context.Context, np *v1.NodePool) (_ []*cloudprovider.InstanceType, err error) {
	defer func() { err = awsclient.ExplainPermission(err) }()
	nc, err := c.nodeClassOf(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil || nc == nil || !ready(nc) {
		return nil, err
	}
	all, err := c.typesOf(ctx, nc)
	if err != nil {
		return nil, err
	}
	// A type no AMI of the class can boot (arm64 with only amd64 AMIs, a
	// GPU type with no accelerated AMI) would be planned and then fail
	// every launch.
	out := make([]*cloudprovider.InstanceType, 0, len(all))
	for _, it := range all {
		if amiFor(nc, it) != "" {
			out = append(out, it)
		}
	}
	out, err = byZoneID(np, nc, out)
	if err != nil {
		return nil, err
	}
	return c.withCommitments(ctx, out), nil
}

// typesOf lists the class's instance types, with no capacity in the
// zones an ARC zonal shift moves away from.
func (c *CloudProvider) typesOf(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*cloudprovider.InstanceType, error) {
	its, err := c.classTypes(ctx, nc)
	if err != nil || c.opts.ZonalShifts == nil {
		return its, err
	}
	return withoutShiftedZones(its, zoneIDsOf(nc), c.opts.ZonalShifts.Shifted()), nil
}

// classTypes lists the class's instance types. In a placement group, each
// carries the group's id label, which every node of the class will have,
// so that pods selecting the group plan onto the class.
func (c *CloudProvider) classTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*cloudprovider.InstanceType, error) {
	all, err := c.opts.InstanceTypes.List(ctx, nc)
	if err != nil {
		return nil, err
	}
	all = c.withReservations(nc, all)
	if c.opts.PlacementGroups == nil || nc.Spec.PlacementGroupSelector == nil {
		return all, nil
	}
	pg, err := c.opts.PlacementGroups.Get(ctx, nc)
	if err != nil || pg == nil {
		return nil, err
	}
	out := make([]*cloudprovider.InstanceType, len(all))
	for i, it := range all {
		cp := it.Copy()
		cp.Labels = make(map[string]string, len(it.Labels)+1)
		for k, v := range it.Labels {
			cp.Labels[k] = v
		}
		cp.Labels[placementgroup.LabelID] = pg.ID
		out[i] = cp
	}
	return out, nil
}

func (c *CloudProvider) nodeClassOf(ctx context.Context, ref *v1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
	return cloudprovider.EC2NodeClass(ctx, c.opts.NodeClasses, ref)
}

// Create launches one instance for the NodeClaim: every compatible, available
// offering of the cheapest allowed capacity type goes into one fleet request,
// and EC2 picks among them. A call IAM refuses names the permission to
// grant first: the NodeClaim's condition, cut short, is all a user sees of
// a failed launch.
func (c *CloudProvider) Create(ctx context.Context, nodeClaim *v1.NodeClaim) (_ *v1.NodeClaim, err error) {
	defer func() { err = awsclient.ExplainPermission(err) }()
	nc, err := c.nodeClassOf(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, &cloudprovider.NodeClassNotReadyError{Err: fmt.Errorf("nodeclaim %s: EC2NodeClass %v not found", nodeClaim.Name, nodeClaim.Spec.NodeClassRef)}
	}
	if !ready(nc) {
		return nil, &cloudprovider.NodeClassNotReadyError{Err: fmt.Errorf("EC2NodeClass %s is not ready: %s", nc.Name, notReadyMessage(nc))}
	}
	reqs, err := requirements.FromNodeSelectorRequirements(nodeClaim.Spec.Requirements...)
	if err != nil {
		return nil, fmt.Errorf("nodeclaim %s: %w", nodeClaim.Name, err)
	}
	all, err := c.typesOf(ctx, nc)
	if err != nil {
		return nil, err
	}
	if c.opts.Overlay != nil {
		all = c.opts.Overlay(nodeClaim.Labels[v1.LabelNodePool], all)
	}
	var its []*cloudprovider.InstanceType
	for _, it := range all {
		if it.Admits(reqs) && resources.FromResourceList(nodeClaim.Spec.Resources.Requests).Fits(resources.FromResourceList(it.Allocatable)) {
			its = append(its, it)
		}
	}
	its = withoutExotic(its, nodeClaim)
	capacityTypes := capacityTypesOf(reqs, its)
	if len(capacityTypes) == 0 {
		return nil, &cloudprovider.InsufficientCapacityError{Err: fmt.Errorf("nodeclaim %s: no available offering of the %d instance types satisfying %s and requests %s",
			nodeClaim.Name, len(its), reqs, resources.ListString(nodeClaim.Spec.Resources.Requests))}
	}
	// A capacity type whose available offerings are all of types without
	// a template (no AMI of the class fits them) or in zones without a
	// subnet cannot launch; the next one may.
	var (
		req       instance.Request
		templates map[string]string
		zones     []string
	)
	launchedAs := ""
	for _, capacityType := range capacityTypes {
		launchedAs = capacityType
		launchable := its
		if capacityType == instance.CapacityTypeSpot {
			launchable = withoutDearSpot(its, reqs)
		}
		if req, templates, zones, err = c.launchRequest(ctx, nc, nodeClaim, reqs, launchable, capacityType); err != nil {
			return nil, err
		}
		if len(req.Overrides) > 0 {
			break
		}
	}
	if len(req.Overrides) == 0 {
		return nil, &cloudprovider.InsufficientCapacityError{Err: fmt.Errorf("nodeclaim %s: no available %s offering is both of a type an AMI of EC2NodeClass %s fits (%d of the %d types) and in a zone with a subnet (zones of the offerings: %s)",
			nodeClaim.Name, strings.Join(capacityTypes, " or "), nc.Name, len(templates), len(its), strings.Join(zones, ", "))}
	}
	inst, err := c.resumed(ctx, nodeClaim, reqs)
	if err != nil {
		return nil, err
	}
	if inst == nil {
		inst, err = c.opts.Instances.Create(ctx, req)
	}
	if err != nil {
		var ice *instance.InsufficientCapacityError
		if errors.As(err, &ice) {
			if launchedAs == v1.CapacityTypeReserved {
				// A full reservation says nothing of on-demand capacity.
				for _, o := range ice.Offerings {
					for _, r := range c.reservationsFor(nc, o.InstanceType, o.Zone) {
						c.opts.CapacityReservations.Exhausted(r.ID)
					}
				}
			} else {
				c.markOut(ctx, nc, its, ice.Offerings)
			}
			if ct := ice.CapacityTypeOut; ct != "" {
				// The NodeClaim's pods are planned again without it: a
				// pool that allows on-demand falls back to it.
				c.opts.Unavailable.MarkCapacityTypeUnavailable(ct, ice.Message)
				log.FromContext(ctx).Error(err, "capacity type unavailable; launches fall back to the pools' other capacity types", "capacity-type", ct,
					"fix", "create the spot service-linked role: aws iam create-service-linked-role --aws-service-name spot.amazonaws.com")
			}
			return nil, &cloudprovider.InsufficientCapacityError{Err: err}
		}
		if instance.IsLaunchTemplateNotFound(err) {
			// Deleted behind Joiner's back: the next try makes them again
			// instead of naming them for the rest of the cache's TTL.
			var names []string
			for _, n := range templates {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
			sort.Strings(names)
			c.opts.LaunchTemplates.Forget(names)
			return nil, fmt.Errorf("launching nodeclaim %s: a launch template is gone, made again on the next try: %w", nodeClaim.Name, err)
		}
		return nil, fmt.Errorf("launching nodeclaim %s: %w", nodeClaim.Name, err)
	}
	// EC2 fell through to this instance past offerings it had no capacity
	// for: they are out just as those of a failed launch are.
	c.markOut(ctx, nc, its, inst.OutOfCapacity)
	if inst.SubnetID != "" {
		c.opts.Subnets.UpdateInflightIPs(map[string]int{inst.SubnetID: 1})
	}
	tagged := c.tagForClaim(ctx, inst, nodeClaim.Name)
	var chosen *cloudprovider.InstanceType
	for _, it := range its {
		if it.Name == inst.Type {
			chosen = it
		}
	}
	out := nodeClaim.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if chosen != nil {
		for k, v := range chosen.Labels {
			out.Labels[k] = v
		}
		out.Status.Capacity = chosen.Capacity.DeepCopy()
		out.Status.Allocatable = chosen.Allocatable.DeepCopy()
	}
	out.Labels[corev1.LabelInstanceTypeStable] = inst.Type
	out.Labels[corev1.LabelTopologyZone] = inst.Zone
	out.Labels[corev1.LabelTopologyRegion] = c.opts.Region
	out.Labels[v1.LabelCapacityType] = inst.CapacityType
	if id := zoneIDsOf(nc)[inst.Zone]; id != "" {
		out.Labels[LabelZoneID] = id
	}
	// Only a launch made into a reservation is labelled reserved, as
	// Karpenter labels it: an ordinary launch that EC2 put into an open
	// reservation (the ReservedCapacity gate off) is billed on demand as
	// far as Joiner knows, and relabelling it would drift it.
	reservation := ""
	if launchedAs == v1.CapacityTypeReserved {
		reservation = inst.CapacityReservationID
	}
	if reservation == "" && launchedAs == v1.CapacityTypeReserved && !tagged {
		// Not described yet (the tagging that reads it failed): the
		// fleet's only way into the type and zone was a reservation.
		if rs := c.reservationsFor(nc, inst.Type, inst.Zone); len(rs) > 0 {
			reservation = rs[0].ID
		}
	}
	if reservation != "" {
		c.reserved(out, nc, reservation)
	}
	if tenancy, err := Tenancy(nodeClaim); err == nil {
		out.Labels[LabelInstanceTenancy] = tenancy
	}
	// The group is where EC2 put the instance, not where the type was
	// planned: an instance outside it carries no label, and drifts.
	delete(out.Labels, placementgroup.LabelID)
	if inst.PlacementGroupID != "" {
		out.Labels[placementgroup.LabelID] = inst.PlacementGroupID
		if inst.PlacementPartition > 0 {
			out.Labels[placementgroup.LabelPartition] = strconv.Itoa(int(inst.PlacementPartition))
		}
	}
	out.Status.ProviderID = inst.ProviderID()
	out.Status.ImageID = inst.ImageID
	if out.Status.ImageID == "" && chosen != nil {
		out.Status.ImageID = amiFor(nc, chosen)
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[awsv1.AnnotationEC2NodeClassHash] = nc.Hash()
	out.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	if nc.Status.InstanceProfile != "" {
		out.Annotations[awsv1.AnnotationInstanceProfile] = nc.Status.InstanceProfile
	}
	if tagged {
		out.Annotations[awsv1.AnnotationInstanceTagged] = "true"
	}
	return out, nil
}

// capacityTypesOf are the capacity types the NodeClaim allows and some
// offering is available in, spot first, as Karpenter does: spot is the
// cheaper market, and a pool that allows it has said interruptions are
// acceptable.
func capacityTypesOf(reqs requirements.Requirements, its []*cloudprovider.InstanceType) []string {
	var out []string
	for _, ct := range []string{v1.CapacityTypeReserved, instance.CapacityTypeSpot, instance.CapacityTypeOnDemand} {
		if !reqs.Allows(v1.LabelCapacityType, ct) {
			continue
		}
		if slices.ContainsFunc(its, func(it *cloudprovider.InstanceType) bool {
			return slices.ContainsFunc(it.Offerings, func(o cloudprovider.Offering) bool {
				return o.Available && o.CapacityType == ct && reqs.Allows(corev1.LabelTopologyZone, o.Zone)
			})
		}) {
			out = append(out, ct)
		}
	}
	return out
}

// launchRequest is the fleet request of one capacity type: every available
// offering in the NodeClaim's zones of a type with a launch template, in
// its zone's subnet. It has no overrides when no offering qualifies; it
// also returns the templates and the zones of the offerings, for the
// error that says so.
func (c *CloudProvider) launchRequest(ctx context.Context, nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim, reqs requirements.Requirements,
	its []*cloudprovider.InstanceType, capacityType string) (instance.Request, map[string]string, []string, error) {
	if capacityType == v1.CapacityTypeReserved {
		return c.reservedRequest(ctx, nc, nodeClaim, reqs, its)
	}
	templates, err := c.opts.LaunchTemplates.ForLaunch(ctx, nc, nodeClaim, its, capacityType)
	if err != nil {
		return instance.Request{}, nil, nil, err
	}
	var zones []string
	type candidate struct {
		it *cloudprovider.InstanceType
		o  cloudprovider.Offering
	}
	var cands []candidate
	zoneIDs := zoneIDsOf(nc)
	for _, it := range its {
		if templates[it.Name] == "" {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && o.CapacityType == capacityType && reqs.Allows(corev1.LabelTopologyZone, o.Zone) && reqs.Allows(LabelZoneID, zoneIDs[o.Zone]) {
				cands = append(cands, candidate{it, o})
				if !slices.Contains(zones, o.Zone) {
					zones = append(zones, o.Zone)
				}
			}
		}
	}
	sort.Strings(zones)
	subnets, err := c.opts.Subnets.ZonalForLaunch(ctx, nc, zones)
	if err != nil {
		return instance.Request{}, nil, nil, err
	}
	req := instance.Request{CapacityType: capacityType, Tags: c.launchTags(nc, nodeClaim), Token: string(nodeClaim.UID), Context: aws.ToString(nc.Spec.Context)}
	for _, cd := range cands {
		req.Prioritized = req.Prioritized || cd.it.PriceOverlaid
		if s := aws.ToString(subnets[cd.o.Zone].SubnetId); s != "" {
			req.Overrides = append(req.Overrides, instance.Override{LaunchTemplate: templates[cd.it.Name], InstanceType: cd.it.Name,
				SubnetID: s, Zone: cd.o.Zone, ZoneID: zoneIDs[cd.o.Zone], Price: cd.o.Price})
		}
	}
	return req, templates, zones, nil
}

// launchTags are the tags every instance of the same pool and class shares,
// so concurrent launches can share one fleet request.
func (c *CloudProvider) launchTags(nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim) map[string]string {
	out := map[string]string{}
	for k, v := range nc.Spec.Tags {
		out[k] = v
	}
	out[tags.Cluster(c.opts.ClusterName)] = "owned"
	out[tags.EKSClusterName] = c.opts.ClusterName
	out[tags.NodePool] = nodeClaim.Labels[v1.LabelNodePool]
	out[tags.NodeClass] = nc.Name
	return out
}

// amiFits reports whether the AMI's requirements accept the instance type.
func amiFits(ami awsv1.AMI, it *cloudprovider.InstanceType) bool {
	var in []v1.NodeSelectorRequirementWithMinValues
	for _, r := range ami.Requirements {
		in = append(in, v1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	reqs, err := requirements.FromNodeSelectorRequirements(in...)
	if err != nil {
		return false
	}
	for _, r := range ami.Requirements {
		v, ok := it.Labels[r.Key]
		if r.Key == corev1.LabelInstanceTypeStable {
			v, ok = it.Name, true
		}
		if !ok {
			if r.Operator == corev1.NodeSelectorOpIn || r.Operator == corev1.NodeSelectorOpExists {
				return false
			}
			continue
		}
		if !reqs.Allows(r.Key, v) {
			return false
		}
	}
	return true
}

// ready is the class's Ready condition, as EC2NodeClass.Readiness decides
// it for the controller and the NodePool status too.
func ready(nc *awsv1.EC2NodeClass) bool {
	status, _, _ := nc.Readiness()
	return status == metav1.ConditionTrue
}

func notReadyMessage(nc *awsv1.EC2NodeClass) string {
	_, reason, message := nc.Readiness()
	return reason + ": " + message
}
