// Package launchtemplate keeps the EC2 launch templates Joiner launches
// from: one per distinct launch configuration (AMI, user data, class
// settings, tags), named by a hash of that configuration so that equal
// configurations share a template and any change yields a new one. Launch
// templates are immutable here: a template is never modified, only created
// and, with its class, deleted.
package launchtemplate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/amifamily"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

const (
	// NamePrefix starts every template name Joiner creates.
	NamePrefix = "joiner/"
	// DefaultTTL is how long a template is known without asking EC2 again
	// after its last use, and how long an unused template is kept.
	DefaultTTL = 5 * time.Minute
)

// EC2API is the part of EC2 the provider calls.
type EC2API interface {
	CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	DeleteLaunchTemplate(ctx context.Context, in *ec2.DeleteLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
}

// Input is one launch configuration.
type Input struct {
	// NodeClassName and NodeClassHash identify the class; the hash is part
	// of the template's identity, so a changed class gets new templates.
	NodeClassName string
	NodeClassHash string
	// NodePool is tagged on the template when set.
	NodePool string
	// CapacityType "spot" also tags the spot request the template makes.
	CapacityType string
	// AMIFamily chooses the default block devices.
	AMIFamily string
	ImageID   string
	// UserData is base64, from amifamily.UserData.
	UserData         string
	SecurityGroupIDs []string
	InstanceProfile  string
	// BlockDeviceMappings from the class; empty means the family's defaults.
	BlockDeviceMappings []*awsv1.BlockDeviceMapping
	// MetadataOptions from the class; unset fields take the CRD defaults.
	MetadataOptions          *awsv1.MetadataOptions
	DetailedMonitoring       bool
	AssociatePublicIPAddress *bool
	IPPrefixCount            *int32
	// Tags are the class's tags; Joiner's own tags are added over them.
	Tags map[string]string
	// PlacementGroupID is the class's resolved placement group; empty for
	// none. PlacementPartition, when not 0, is the partition of a partition
	// group the NodeClaim requires.
	PlacementGroupID   string
	PlacementPartition int32
	// ConnectionTracking is spec.connectionTracking, set on the interfaces
	// that carry IP traffic.
	ConnectionTracking *awsv1.ConnectionTracking
	// NestedVirtualization is spec.cpuOptions.nestedVirtualization.
	NestedVirtualization *string
	// NetworkInterfaces are spec.networkInterfaces; when the class lists
	// none, EFAInterfaces EFA interfaces (one per network card) are
	// attached for a NodeClaim that requests vpc.amazonaws.com/efa, else
	// the one primary interface.
	NetworkInterfaces []awsv1.NetworkInterface
	EFAInterfaces     int32
	// Tenancy "dedicated" launches on single-tenant hardware; "" or
	// "default" on shared.
	Tenancy string
	// CapacityReservationID targets the instance at one reservation;
	// CapacityBlock says it is a Capacity Block, which EC2 launches only
	// under its own market type.
	CapacityReservationID string
	CapacityBlock         bool
	// Interruptible says the reservation is interruptible, which EC2
	// launches into only under its own market type.
	Interruptible bool
	// ReservationsTargeted is the ReservedCapacity gate: a launch into no
	// reservation opts out of open ones (EC2 would otherwise fill an open
	// On-Demand Capacity Reservation with it), as Karpenter's targeted
	// launches do. Off, launches are left as EC2 places them.
	ReservationsTargeted bool
	// IPv6 is an IPv6 cluster: the IP interfaces get a primary IPv6
	// address, and spec.ipPrefixCount counts IPv6 prefixes, which the VPC
	// CNI assigns pods from.
	IPv6 bool
}

// LaunchTemplate is a template that exists in EC2.
type LaunchTemplate struct {
	ID   string
	Name string
}

// Provider creates launch templates, remembers them for a TTL, and deletes
// a class's templates.
type Provider struct {
	ec2         EC2API
	clusterName string
	clock       clock.Clock
	ttl         time.Duration

	mu    sync.Mutex
	known map[string]known
	group singleflight.Group
}

type known struct {
	lt      LaunchTemplate
	class   string
	expires time.Time
}

// New returns a provider for one cluster. A nil clock is the wall clock; a
// zero ttl is DefaultTTL.
func New(api EC2API, clusterName string, clk clock.Clock, ttl time.Duration) *Provider {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Provider{ec2: api, clusterName: clusterName, clock: clk, ttl: ttl, known: map[string]known{}}
}

// Ensure returns the template for the input, creating it when EC2 does not
// have it. Concurrent calls for one input make one call to EC2.
func (p *Provider) Ensure(ctx context.Context, in Input) (LaunchTemplate, error) {
	if err := p.validate(in); err != nil {
		return LaunchTemplate{}, err
	}
	req := p.request(in)
	name := aws.ToString(req.LaunchTemplateName)
	if lt, ok := p.lookup(name); ok {
		return lt, nil
	}
	v, err, _ := p.group.Do(name, func() (any, error) {
		if lt, ok := p.lookup(name); ok {
			return lt, nil
		}
		lt, err := p.create(ctx, req)
		if err != nil {
			return LaunchTemplate{}, err
		}
		RecordUserData(ctx, in.NodeClassName, in.UserData)
		p.mu.Lock()
		p.known[name] = known{lt: lt, class: in.NodeClassName, expires: p.clock.Now().Add(p.ttl)}
		p.mu.Unlock()
		return lt, nil
	})
	if err != nil {
		return LaunchTemplate{}, err
	}
	return v.(LaunchTemplate), nil
}

// Invalidate forgets a template, for a caller that learned from EC2 that it
// is gone (a launch failing with a missing launch template); the next
// Ensure creates it again.
func (p *Provider) Invalidate(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.known, name)
}

// lookup returns a template known and used within the TTL, and restarts
// its TTL: a template in use stays known, and Sweep leaves it alone.
func (p *Provider) lookup(name string) (LaunchTemplate, bool) {
	return p.find(name, true)
}

// find returns a template known and used within the TTL, restarting its TTL
// when touch is set and forgetting it when it has expired.
func (p *Provider) find(name string, touch bool) (LaunchTemplate, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.known[name]
	now := p.clock.Now()
	if !ok || !now.Before(k.expires) {
		delete(p.known, name)
		return LaunchTemplate{}, false
	}
	if touch {
		k.expires = now.Add(p.ttl)
		p.known[name] = k
	}
	return k.lt, true
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica sweeps.
func (p *Provider) NeedLeaderElection() bool { return true }

// Start sweeps every TTL until ctx ends.
func (p *Provider) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("launchtemplate")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.clock.After(p.ttl):
		}
		n, err := p.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "deleting unused launch templates")
		}
		if n > 0 {
			logger.V(1).Info("deleted unused launch templates", "count", n)
		}
	}
}

// Sweep deletes the cluster's templates that no launch of this process
// used within the TTL and that are older than the TTL, and says how many
// it deleted. Every change of a class, AMI, pool or instance type group
// makes new templates, and EC2 allows 5,000 per region; a template is only
// a cache of a launch configuration, made again when a launch needs it.
// The age check spares a template another process (a new leader) has just
// made.
func (p *Provider) Sweep(ctx context.Context) (int, error) {
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters:    []ec2types.Filter{{Name: aws.String("tag:" + tags.Cluster(p.clusterName)), Values: []string{"owned"}}},
		MaxResults: aws.Int32(200),
	})
	now := p.clock.Now()
	deleted := 0
	var errs []error
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return deleted, fmt.Errorf("listing the cluster's launch templates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			name := aws.ToString(lt.LaunchTemplateName)
			if !strings.HasPrefix(name, NamePrefix) || lt.CreateTime == nil || now.Sub(*lt.CreateTime) < p.ttl {
				continue
			}
			if _, ok := p.find(name, false); ok {
				continue
			}
			if _, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId}); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting launch template %s: %w", name, err))
				continue
			}
			deleted++
		}
	}
	return deleted, errors.Join(errs...)
}

// create makes the template, or finds it when it exists: the name is the
// hash of the whole request, so a template of that name is this one (made
// by an earlier process, or by a retry whose answer was lost).
func (p *Provider) create(ctx context.Context, req *ec2.CreateLaunchTemplateInput) (LaunchTemplate, error) {
	name := aws.ToString(req.LaunchTemplateName)
	out, err := p.ec2.CreateLaunchTemplate(ctx, req)
	if err == nil {
		return LaunchTemplate{ID: aws.ToString(out.LaunchTemplate.LaunchTemplateId), Name: name}, nil
	}
	if errorCode(err) != "InvalidLaunchTemplateName.AlreadyExistsException" {
		return LaunchTemplate{}, fmt.Errorf("creating launch template %s: %w", name, err)
	}
	found, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil {
		return LaunchTemplate{}, fmt.Errorf("describing existing launch template %s: %w", name, err)
	}
	if len(found.LaunchTemplates) != 1 {
		return LaunchTemplate{}, fmt.Errorf("launch template %s exists but DescribeLaunchTemplates returned %d templates", name, len(found.LaunchTemplates))
	}
	return LaunchTemplate{ID: aws.ToString(found.LaunchTemplates[0].LaunchTemplateId), Name: name}, nil
}

// DeleteForNodeClass deletes every template of the class in this cluster,
// for the class's finalizer. Templates already gone are not an error.
func (p *Provider) DeleteForNodeClass(ctx context.Context, nodeClassName string) error {
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + tags.Cluster(p.clusterName)), Values: []string{"owned"}},
			{Name: aws.String("tag:" + tags.NodeClass), Values: []string{nodeClassName}},
		},
		MaxResults: aws.Int32(200),
	})
	var errs []error
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing launch templates of EC2NodeClass %s: %w", nodeClassName, err)
		}
		for _, lt := range page.LaunchTemplates {
			_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId})
			if err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting launch template %s: %w", aws.ToString(lt.LaunchTemplateName), err))
			}
		}
	}
	p.mu.Lock()
	for name, k := range p.known {
		if k.class == nodeClassName {
			delete(p.known, name)
		}
	}
	p.mu.Unlock()
	if len(errs) == 0 {
		metrics.EC2NodeClassUserDataBytes.DeleteLabelValues(nodeClassName)
	}
	return errors.Join(errs...)
}

func (p *Provider) validate(in Input) error {
	switch {
	case p.clusterName == "":
		return errors.New("launch templates need the cluster name (CLUSTER_NAME)")
	case in.NodeClassName == "":
		return errors.New("a launch template needs its EC2NodeClass name")
	case in.ImageID == "":
		return fmt.Errorf("EC2NodeClass %s: no AMI to launch; status.amis is empty", in.NodeClassName)
	case len(in.SecurityGroupIDs) == 0:
		return fmt.Errorf("EC2NodeClass %s: no security groups; status.securityGroups is empty", in.NodeClassName)
	case in.InstanceProfile == "":
		return fmt.Errorf("EC2NodeClass %s: no instance profile; status.instanceProfile is empty", in.NodeClassName)
	}
	return nil
}

// Tags are the template's tags: the class's, then Joiner's, which the
// guides' IAM policies require and which DeleteForNodeClass finds.
func (p *Provider) Tags(in Input) map[string]string {
	out := map[string]string{}
	for k, v := range in.Tags {
		out[k] = v
	}
	out[tags.NodeClass] = in.NodeClassName
	out[tags.Cluster(p.clusterName)] = "owned"
	out[tags.EKSClusterName] = p.clusterName
	if in.NodePool != "" {
		out[tags.NodePool] = in.NodePool
	}
	return out
}

// request is the CreateLaunchTemplate call for the input, named and
// tokened by the hash of everything else in it.
func (p *Provider) request(in Input) *ec2.CreateLaunchTemplateInput {
	own := tags.EC2(p.Tags(in))
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:             aws.String(in.ImageID),
		UserData:            aws.String(in.UserData),
		IamInstanceProfile:  &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(in.InstanceProfile)},
		BlockDeviceMappings: blockDeviceMappings(in),
		MetadataOptions:     metadataOptions(in.MetadataOptions),
		Monitoring:          &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(in.DetailedMonitoring)},
		// The security groups go on the interfaces, where the public IP
		// choice also lives; EC2 refuses both forms at once.
		NetworkInterfaces: networkInterfaces(in),
		// CreateFleet tags only the instance; the template tags the
		// volumes and interfaces it creates with it.
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: ec2types.ResourceTypeVolume, Tags: own},
			{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: own},
		},
	}
	switch {
	case in.CapacityReservationID != "":
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(in.CapacityReservationID)},
		}
		if in.CapacityBlock {
			data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		} else if in.Interruptible {
			data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeInterruptibleCapacityReservation}
		}
	case in.ReservationsTargeted:
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone,
		}
	}
	if in.NestedVirtualization != nil {
		data.CpuOptions = &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecification(*in.NestedVirtualization)}
	}
	if in.PlacementGroupID != "" || in.Tenancy == string(ec2types.TenancyDedicated) {
		data.Placement = &ec2types.LaunchTemplatePlacementRequest{}
		if in.PlacementGroupID != "" {
			data.Placement.GroupId = aws.String(in.PlacementGroupID)
			if in.PlacementPartition > 0 {
				data.Placement.PartitionNumber = aws.Int32(in.PlacementPartition)
			}
		}
		if in.Tenancy == string(ec2types.TenancyDedicated) {
			data.Placement.Tenancy = ec2types.TenancyDedicated
		}
	}
	if in.CapacityType == v1.CapacityTypeSpot {
		data.TagSpecifications = append(data.TagSpecifications, ec2types.LaunchTemplateTagSpecificationRequest{
			ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: own,
		})
	}
	hash := v1.SetHash(struct {
		Cluster, NodeClassHash string
		Data                   *ec2types.RequestLaunchTemplateData
	}{p.clusterName, in.NodeClassHash, data})
	return &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(NamePrefix + hash),
		ClientToken:        aws.String(hash),
		LaunchTemplateData: data,
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: own}},
	}
}

func metadataOptions(o *awsv1.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	if o == nil {
		o = &awsv1.MetadataOptions{}
	}
	or := func(p *string, d string) string {
		if p == nil {
			return d
		}
		return *p
	}
	hops := int64(1)
	if o.HTTPPutResponseHopLimit != nil {
		hops = *o.HTTPPutResponseHopLimit
	}
	return &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(or(o.HTTPEndpoint, "enabled")),
		HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(or(o.HTTPProtocolIPv6, "disabled")),
		HttpPutResponseHopLimit: aws.Int32(int32(min(max(hops, 1), 64))),
		HttpTokens:              ec2types.LaunchTemplateHttpTokensState(or(o.HTTPTokens, "required")),
		// An account default of "tags in metadata" would break on tag keys
		// with "/" (kubernetes.io/cluster/...), which IMDS cannot serve.
		InstanceMetadataTags: ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled,
	}
}

func blockDeviceMappings(in Input) []ec2types.LaunchTemplateBlockDeviceMappingRequest {
	mappings := in.BlockDeviceMappings
	if len(mappings) == 0 {
		mappings = amifamily.DefaultBlockDeviceMappings(in.AMIFamily)
	}
	var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
	for _, m := range mappings {
		if m == nil {
			continue
		}
		r := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
		if e := m.EBS; e != nil {
			r.Ebs = &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				DeleteOnTermination:      e.DeleteOnTermination,
				Encrypted:                e.Encrypted,
				KmsKeyId:                 e.KMSKeyID,
				SnapshotId:               e.SnapshotID,
				VolumeInitializationRate: e.VolumeInitializationRate,
				VolumeSize:               gibibytes(e.VolumeSize),
			}
			if e.VolumeType != nil {
				r.Ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
			}
			if e.IOPS != nil {
				r.Ebs.Iops = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				r.Ebs.Throughput = aws.Int32(int32(*e.Throughput))
			}
		}
		out = append(out, r)
	}
	return out
}

// gibibytes is a volume size in GiB, as EC2 takes it, rounded up: "100G"
// is 93.1 GiB and gets 94.
func gibibytes(q *resource.Quantity) *int32 {
	if q == nil {
		return nil
	}
	return aws.Int32(int32(math.Ceil(q.AsApproximateFloat64() / (1 << 30))))
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

func isNotFound(err error) bool {
	switch errorCode(err) {
	case "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.Malformed":
		return true
	}
	return false
}

// connectionTracking is the interface's conntrack timeouts; nil when the
// class sets none, which keeps EC2's defaults.
func connectionTracking(ct *awsv1.ConnectionTracking) *ec2types.ConnectionTrackingSpecificationRequest {
	if ct == nil || (ct.TCPEstablishedTimeout == nil && ct.UDPStreamTimeout == nil && ct.UDPTimeout == nil) {
		return nil
	}
	return &ec2types.ConnectionTrackingSpecificationRequest{
		TcpEstablishedTimeout: ct.TCPEstablishedTimeout, UdpStreamTimeout: ct.UDPStreamTimeout, UdpTimeout: ct.UDPTimeout,
	}
}

// networkInterfaces are the template's interfaces. Every one carries the
// class's security groups. An efa-only interface carries no IP traffic, so
// EC2 refuses a public IP, prefixes or conntrack settings on it.
func networkInterfaces(in Input) []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	iface := func(card, device int32, kind string) ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
		ni := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			NetworkCardIndex: aws.Int32(card), DeviceIndex: aws.Int32(device), Groups: sortedCopy(in.SecurityGroupIDs),
		}
		if kind != "" && kind != "interface" {
			ni.InterfaceType = aws.String(kind)
		}
		if kind != "efa-only" {
			ni.AssociatePublicIpAddress = in.AssociatePublicIPAddress
			ni.ConnectionTrackingSpecification = connectionTracking(in.ConnectionTracking)
			if in.IPv6 {
				ni.Ipv6AddressCount, ni.PrimaryIpv6, ni.Ipv6PrefixCount = aws.Int32(1), aws.Bool(true), in.IPPrefixCount
			} else {
				ni.Ipv4PrefixCount = in.IPPrefixCount
			}
		}
		return ni
	}
	var out []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest
	switch {
	case len(in.NetworkInterfaces) > 0:
		for _, n := range in.NetworkInterfaces {
			out = append(out, iface(n.NetworkCardIndex, n.DeviceIndex, n.InterfaceType))
		}
	case in.EFAInterfaces > 0:
		// One per card; device 0 on the first card is the primary.
		for card := int32(0); card < in.EFAInterfaces; card++ {
			out = append(out, iface(card, min(card, 1), "efa"))
		}
	default:
		primary := iface(0, 0, "")
		primary.NetworkCardIndex = nil
		out = append(out, primary)
	}
	return out
}
