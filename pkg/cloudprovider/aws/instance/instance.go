// Package instance launches, describes and terminates the EC2 instances
// behind NodeClaims.
//
// Every call is batched: a provisioning burst of NodeClaims with the same
// launch configuration becomes one CreateFleet call, and lookups and
// terminations of many instances share DescribeInstances and
// TerminateInstances calls. That keeps a 1,000-pod scale-up inside EC2's
// request limits, as AWS recommends for fleet-sized launches.
package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/batcher"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
	"k8s.io/utils/clock"
)

// EC2API is the part of EC2 this package calls.
type EC2API interface {
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
}

// Capacity types, as the karpenter.sh/capacity-type label spells them.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// MaxInstanceTypes is how many instance types one fleet request offers, as
// in Karpenter: the cheapest 60, each in every zone the NodeClaim allows,
// so that a zone short of the cheapest types still has dozens to choose
// from. Beyond that, further types only make the call slower.
const MaxInstanceTypes = 60

// MaxOverrides is EC2's limit on a fleet's launch-template overrides; the
// cheapest are kept when 60 types in many zones would pass it.
const MaxOverrides = 300

// Override is one (instance type, subnet) a fleet may launch into, with the
// launch template its architecture and accelerators need.
type Override struct {
	LaunchTemplate string
	InstanceType   string
	SubnetID       string
	Zone           string
	// ZoneID is the zone's ID (use1-az1), for the launch failure metric.
	ZoneID string
	// Price orders the overrides for on-demand's lowest-price strategy and
	// chooses which 60 are kept.
	Price float64
}

// Request is one NodeClaim's launch.
type Request struct {
	CapacityType string
	Overrides    []Override
	// Tags go on the instance at launch (the launch template tags its
	// volumes and interfaces). They must be the same for every NodeClaim of
	// a batch (pool, class, cluster); NodeClaim-specific tags are added
	// after, with Tag.
	Tags map[string]string
	// Token identifies the launch for idempotency (the NodeClaim's UID).
	Token string
	// Context is the class's spec.context, CreateFleet's reserved Context
	// field; empty for none.
	Context string
	// Prioritized says the prices are NodeOverlays', which EC2 does not
	// know: the fleet follows the overrides' order (prioritized on-demand,
	// capacity-optimized-prioritized spot), as Karpenter's does, instead of
	// EC2's own list prices.
	Prioritized bool
}

// Instance is what Joiner needs to know of an EC2 instance.
type Instance struct {
	ID   string
	Type string
	Zone string
	// ZoneID is the zone's ID, when DescribeInstances gives it.
	ZoneID       string
	CapacityType string
	ImageID      string
	SubnetID     string
	State        string
	PrivateDNS   string
	LaunchTime   time.Time
	Tags         map[string]string
	// SecurityGroupIDs are the groups of the primary interface, which
	// drift is judged by.
	SecurityGroupIDs []string
	// PlacementGroupID and PlacementPartition say where EC2 placed the
	// instance when its template named a placement group; the partition is
	// 0 outside a partition group.
	PlacementGroupID   string
	PlacementPartition int32
	// CapacityReservationID is the reservation the instance runs in, if any.
	CapacityReservationID string
	// OutOfCapacity are the offerings the fleet call that launched this
	// instance reported without capacity before it fell through to one
	// that had some. They are as unavailable as those of a failed launch:
	// left unmarked, the next launch, and consolidation's cheaper
	// replacement, would ask EC2 for them again.
	OutOfCapacity []Offering
}

// ProviderID is the Node's spec.providerID for this instance.
func (i *Instance) ProviderID() string { return fmt.Sprintf("aws:///%s/%s", i.Zone, i.ID) }

// ParseProviderID returns the instance ID of aws:///<zone>/<id>.
func ParseProviderID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, "aws:///")
	if !ok {
		return "", fmt.Errorf("provider ID %q is not of the form aws:///<zone>/<instance-id>", providerID)
	}
	_, id, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("provider ID %q is not of the form aws:///<zone>/<instance-id>", providerID)
	}
	return id, nil
}

// InsufficientCapacityError is a launch that found no capacity in any
// override; Offerings lists what EC2 reported out, so the caller can mark
// them unavailable.
type InsufficientCapacityError struct {
	Offerings []Offering
	// CapacityTypeOut is a capacity type no offering of which can launch
	// for now, whatever the type and zone: spot in an account whose spot
	// service-linked role is missing and may not be created.
	CapacityTypeOut string
	Message         string
}

// Offering names one (type, zone, capacity type). SpreadLimit: EC2 refused
// it because the launch's spread placement group holds its seven instances
// in the zone already, which no other type there would change.
type Offering struct {
	InstanceType, Zone, CapacityType string
	SpreadLimit                      bool
}

func (e *InsufficientCapacityError) Error() string {
	if e.CapacityTypeOut == CapacityTypeSpot {
		// The fix first: the event that carries this is cut at 300 bytes.
		return "spot is unavailable: the account has no spot service-linked role and Joiner may not create it; launching on-demand where pools allow it until it is created (aws iam create-service-linked-role --aws-service-name spot.amazonaws.com): " + e.Message
	}
	return "no capacity for any launch option: " + e.Message
}

// NotFoundError is an instance that does not exist, or no longer runs.
type NotFoundError struct {
	ID string
	// Terminated: EC2 described the instance as terminated. Otherwise it
	// did not describe it at all, which right after a launch may only be
	// its reads lagging.
	Terminated bool
}

// IsTerminated reports a NotFoundError for an instance EC2 described as
// terminated.
func IsTerminated(err error) bool {
	var e *NotFoundError
	return errors.As(err, &e) && e.Terminated
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("instance %s not found", e.ID) }

// IsNotFound reports whether err is a NotFoundError.
func IsNotFound(err error) bool {
	var e *NotFoundError
	return errors.As(err, &e)
}

// Options configure the provider.
type Options struct {
	EC2         EC2API
	ClusterName string
	Clock       clock.WithDelayedExecution
}

// Provider launches and finds instances.
type Provider struct {
	ec2         EC2API
	clusterName string
	clock       clock.WithDelayedExecution
	fleet       *batcher.Batcher[string, Request, []*Instance]
	describe    *batcher.Batcher[struct{}, string, *Instance]
	terminate   *batcher.Batcher[struct{}, string, struct{}]

	mu   sync.Mutex
	seen map[string]seenInstance
	// unsettled are the fleet calls of unknown outcome, by request token.
	unsettled map[string]*unsettled
	// handed are the instances this process gave to NodeClaims, by ID,
	// with when (see Launched).
	handed map[string]time.Time
	// calling are the client tokens of the fleet calls under way.
	calling map[string]bool
}

// seenInstance is an instance's last description and when it was made.
type seenInstance struct {
	inst *Instance
	at   time.Time
}

// New builds the provider and its batchers.
func New(opts Options) *Provider {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	p := &Provider{ec2: opts.EC2, clusterName: opts.ClusterName, clock: opts.Clock, seen: map[string]seenInstance{}, unsettled: map[string]*unsettled{}, handed: map[string]time.Time{}, calling: map[string]bool{}}
	// The windows: a provisioning batch creates its NodeClaims within
	// milliseconds of each other, so 35ms of quiet closes a launch batch
	// without delaying a lone launch noticeably.
	p.fleet = batcher.New(batcher.Options{Idle: 35 * time.Millisecond, Max: time.Second, MaxItems: 1000, Clock: opts.Clock, Name: "create_fleet"}, p.createFleet)
	p.describe = batcher.New(batcher.Options{Idle: 100 * time.Millisecond, Max: time.Second, MaxItems: 500, Clock: opts.Clock, Name: "describe_instances"}, p.describeBatch)
	p.terminate = batcher.New(batcher.Options{Idle: 100 * time.Millisecond, Max: time.Second, MaxItems: 500, Clock: opts.Clock, Name: "terminate_instances"}, p.terminateBatch)
	return p
}

// ClusterTag is the tag every instance of the cluster carries.
func (p *Provider) ClusterTag() string { return "kubernetes.io/cluster/" + p.clusterName }

// Create launches one instance for the request, batched with concurrent
// requests of the same configuration. A request whose last fleet call
// ended with its outcome unknown asks that call again instead.
func (p *Provider) Create(ctx context.Context, req Request) (*Instance, error) {
	if u := p.unsettledFor(req.Token); u != nil {
		return p.settle(ctx, u, req.Token)
	}
	if len(req.Overrides) == 0 {
		return nil, &InsufficientCapacityError{Message: "no launch options left (every offering is unavailable)"}
	}
	req.Overrides = trimOverrides(req.CapacityType, req.Overrides)
	got, err := p.fleet.Do(ctx, batchKey(req), req)
	if err != nil {
		return nil, err
	}
	return got[0], nil
}

// trimOverrides keeps every override of the MaxInstanceTypes types whose
// cheapest override is cheapest, at most MaxOverrides of them, ordered by
// price (on-demand's lowest-price strategy follows priority; spot's
// price-capacity-optimized weighs price itself, so the order matters only
// for which are kept).
func trimOverrides(capacityType string, in []Override) []Override {
	out := append([]Override(nil), in...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Price != out[j].Price {
			return out[i].Price < out[j].Price
		}
		if out[i].InstanceType != out[j].InstanceType {
			return out[i].InstanceType < out[j].InstanceType
		}
		return out[i].Zone < out[j].Zone
	})
	// In price order, a type's first override is its cheapest.
	kept := map[string]bool{}
	for _, o := range out {
		if len(kept) == MaxInstanceTypes {
			break
		}
		kept[o.InstanceType] = true
	}
	trimmed := out[:0]
	for _, o := range out {
		if kept[o.InstanceType] && len(trimmed) < MaxOverrides {
			trimmed = append(trimmed, o)
		}
	}
	return trimmed
}

// batchKey is equal for requests one fleet call can serve.
func batchKey(r Request) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%t\n", r.CapacityType, r.Context, r.Prioritized)
	for _, o := range r.Overrides {
		fmt.Fprintf(h, "%s|%s|%s|%s\n", o.LaunchTemplate, o.InstanceType, o.SubnetID, o.Zone)
	}
	keys := make([]string, 0, len(r.Tags))
	for k := range r.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, r.Tags[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (p *Provider) createFleet(ctx context.Context, _ string, reqs []Request) []batcher.Result[[]*Instance] {
	in := fleetInput(reqs)
	// While the call runs (the SDK's retries included) its instances may
	// already exist, tagged with no NodeClaim: no resumed launch may take
	// them (see Launched).
	token := aws.ToString(in.ClientToken)
	p.mu.Lock()
	p.calling[token] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.calling, token)
		p.mu.Unlock()
	}()
	resp, err := p.ec2.CreateFleet(ctx, in)
	if err != nil {
		if outcomeUnknown(err) {
			p.rememberUnsettled(in, reqs)
			err = fmt.Errorf("creating fleet (EC2 may have launched it: the retry asks again with the same client token): %w", err)
		} else {
			err = fmt.Errorf("creating fleet: %w", err)
		}
		out := make([]batcher.Result[[]*Instance], len(reqs))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	return p.fleetResults(reqs, resp)
}

// fleetInput is the one instant fleet call for a batch of equal requests.
// Its client token is made of the requests' own, so the same batch asked
// again is the same call to EC2.
func fleetInput(reqs []Request) *ec2.CreateFleetInput {
	first := reqs[0]
	tokens := make([]string, len(reqs))
	for i, r := range reqs {
		tokens[i] = r.Token
	}
	sort.Strings(tokens)
	sum := sha256.Sum256([]byte(strings.Join(tokens, ",")))
	token := hex.EncodeToString(sum[:16])
	instanceTags := maps.Clone(first.Tags)
	if instanceTags == nil {
		instanceTags = map[string]string{}
	}
	instanceTags[tags.LaunchToken] = token
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		ClientToken:           aws.String(token),
		LaunchTemplateConfigs: launchConfigs(first),
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(int32(len(reqs))),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(first.CapacityType),
		},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags.EC2(instanceTags)},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tags.EC2(first.Tags)},
		},
	}
	if first.Context != "" {
		in.Context = aws.String(first.Context)
	}
	switch {
	case first.CapacityType == CapacityTypeSpot && first.Prioritized:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized}
	case first.CapacityType == CapacityTypeSpot:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	case first.Prioritized:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyPrioritized}
	default:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in
}

// fleetResults hands the fleet's instances to the requests in order; the
// requests left over get the capacity errors EC2 reported.
func (p *Provider) fleetResults(reqs []Request, resp *ec2.CreateFleetOutput) []batcher.Result[[]*Instance] {
	out := make([]batcher.Result[[]*Instance], len(reqs))
	first := reqs[0]
	var launched []*Instance
	for _, fi := range resp.Instances {
		zone, subnet := "", ""
		if lto := fi.LaunchTemplateAndOverrides; lto != nil && lto.Overrides != nil {
			zone, subnet = aws.ToString(lto.Overrides.AvailabilityZone), aws.ToString(lto.Overrides.SubnetId)
		}
		if zone == "" {
			zone = zoneOfSubnet(first.Overrides, subnet)
		}
		for _, id := range fi.InstanceIds {
			launched = append(launched, &Instance{ID: id, Type: string(fi.InstanceType), Zone: zone, SubnetID: subnet,
				CapacityType: first.CapacityType, State: string(ec2types.InstanceStateNamePending), Tags: first.Tags, LaunchTime: p.clock.Now()})
		}
	}
	p.hand(launched)
	var ice []Offering
	var msgs []string
	capacity, typeOut, templateGone := false, "", false
	for _, e := range resp.Errors {
		code := aws.ToString(e.ErrorCode)
		msgs = append(msgs, code+": "+aws.ToString(e.ErrorMessage))
		countLaunchFailure(e, first)
		if code == codeSpotRoleMissing && first.CapacityType == CapacityTypeSpot {
			capacity, typeOut = true, CapacityTypeSpot
			continue
		}
		capacity = capacity || isCapacityCode(code)
		templateGone = templateGone || templateNotFoundCodes[code]
		if isCapacityCode(code) && e.LaunchTemplateAndOverrides != nil && e.LaunchTemplateAndOverrides.Overrides != nil {
			o := e.LaunchTemplateAndOverrides.Overrides
			ice = append(ice, Offering{InstanceType: string(o.InstanceType), Zone: errorZone(e, first.Overrides), CapacityType: first.CapacityType,
				SpreadLimit: strings.Contains(aws.ToString(e.ErrorMessage), "limit of instances in this spread placement group")})
		}
	}
	for i := range reqs {
		if i < len(launched) {
			launched[i].OutOfCapacity = ice
			out[i].Value = []*Instance{launched[i]}
			continue
		}
		if templateGone {
			out[i].Err = &LaunchTemplateNotFoundError{Message: strings.Join(uniq(msgs), "; ")}
		} else if capacity || len(msgs) == 0 {
			out[i].Err = &InsufficientCapacityError{Offerings: ice, CapacityTypeOut: typeOut, Message: strings.Join(uniq(msgs), "; ")}
		} else {
			out[i].Err = fmt.Errorf("creating fleet: %s", strings.Join(uniq(msgs), "; "))
		}
	}
	return out
}

// isCapacityCode tells EC2's capacity errors from configuration errors:
// only the former mean "try another offering". The account's limits
// (vCPUs per capacity type and family class, spot instances, fleets) are
// capacity too: another type, zone or capacity type may still fit under
// them, and the NodeClaim's pods are better planned again than retried on
// the same offerings.
func isCapacityCode(code string) bool {
	switch code {
	case "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity",
		"InsufficientCapacity", "MaxSpotInstanceCountExceeded", "UnfulfillableCapacity",
		"Unsupported", "SpotMaxPriceTooLow", "InsufficientFreeAddressesInSubnet",
		"VcpuLimitExceeded", "MaxFleetCountExceeded", "ReservationCapacityExceeded":
		return true
	}
	return false
}

// templateNotFoundCodes are EC2's answers to a launch from a launch
// template that no longer exists (deleted by hand, or by another
// controller): the cached template must be made again.
var templateNotFoundCodes = map[string]bool{
	"InvalidLaunchTemplateId.NotFound": true, "InvalidLaunchTemplateName.NotFoundException": true,
	"InvalidLaunchTemplateId.VersionNotFound": true,
}

// LaunchTemplateNotFoundError is a launch refused because a launch template
// it named is gone.
type LaunchTemplateNotFoundError struct{ Message string }

func (e *LaunchTemplateNotFoundError) Error() string {
	return "launch template not found: " + e.Message
}

// IsLaunchTemplateNotFound reports whether a launch failed for a missing
// launch template, in the fleet's answer or as the call's own error.
func IsLaunchTemplateNotFound(err error) bool {
	var gone *LaunchTemplateNotFoundError
	if errors.As(err, &gone) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && templateNotFoundCodes[api.ErrorCode()]
}

// codeSpotRoleMissing is EC2's answer to a spot launch in an account without
// the spot service-linked role (AWSServiceRoleForEC2Spot) when the caller
// may not create it: no spot offering can launch until someone creates the
// role (aws iam create-service-linked-role --aws-service-name spot.amazonaws.com,
// a step of the getting-started guide).
const codeSpotRoleMissing = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"

func launchConfigs(r Request) []ec2types.FleetLaunchTemplateConfigRequest {
	byTemplate := map[string][]ec2types.FleetLaunchTemplateOverridesRequest{}
	var order []string
	for i, o := range r.Overrides {
		if _, ok := byTemplate[o.LaunchTemplate]; !ok {
			order = append(order, o.LaunchTemplate)
		}
		ov := ec2types.FleetLaunchTemplateOverridesRequest{
			InstanceType:     ec2types.InstanceType(o.InstanceType),
			SubnetId:         aws.String(o.SubnetID),
			AvailabilityZone: aws.String(o.Zone),
		}
		if r.CapacityType != CapacityTypeSpot || r.Prioritized {
			ov.Priority = aws.Float64(float64(i))
		}
		byTemplate[o.LaunchTemplate] = append(byTemplate[o.LaunchTemplate], ov)
	}
	out := make([]ec2types.FleetLaunchTemplateConfigRequest, 0, len(order))
	for _, lt := range order {
		out = append(out, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides:                   byTemplate[lt],
		})
	}
	return out
}

// errorZone is the zone of a fleet error's override: the one EC2 names,
// else its subnet's, from the request; "" when the error names neither.
func errorZone(e ec2types.CreateFleetError, overrides []Override) string {
	lto := e.LaunchTemplateAndOverrides
	if lto == nil || lto.Overrides == nil {
		return ""
	}
	if zone := aws.ToString(lto.Overrides.AvailabilityZone); zone != "" {
		return zone
	}
	return zoneOfSubnet(overrides, aws.ToString(lto.Overrides.SubnetId))
}

func zoneOfSubnet(overrides []Override, subnet string) string {
	for _, o := range overrides {
		if o.SubnetID == subnet {
			return o.Zone
		}
	}
	return ""
}

func uniq(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
