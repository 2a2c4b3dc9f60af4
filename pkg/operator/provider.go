package operator

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	awsprovider "github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/amifamily"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/capacityreservation"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/commitments"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instanceprofile"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instancetype"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/launchtemplate"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/pricing"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/securitygroup"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/subnet"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/unavailable"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/zonalshift"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/kwok"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/interruption"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/node/capacity"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/reservation"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/tagging"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclass"
	zonalshiftevents "github.com/joiner-autoscaler/joiner/pkg/controllers/zonalshift"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// providerClock is what the providers need of a clock: tickers for their
// refresh loops and timers for their request batches.
type providerClock interface {
	clock.WithTicker
	clock.WithDelayedExecution
}

// newCloudProvider is the one place the provider is chosen: it builds the
// provider and registers the controllers only that provider needs (the
// EC2NodeClass status controller of each).
func newCloudProvider(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, opts *Options, clk providerClock, recorder record.EventRecorder, typeOverlay cloudprovider.TypeOverlay) (cloudprovider.CloudProvider, error) {
	switch opts.CloudProvider {
	case "kwok":
		// The provider must read its own writes (a retried Create looks for
		// the Node it made), so it gets an uncached client.
		direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return nil, err
		}
		provider, err := kwok.New(direct, kwok.Options{Region: opts.KwokRegion, Zones: opts.KwokZones, LaunchDelay: opts.KwokLaunchDelay, Clock: clk, NodeClasses: mgr.GetClient(), Overlay: typeOverlay})
		if err != nil {
			return nil, err
		}
		return provider, (&nodeclass.KwokController{Client: mgr.GetClient(), Clock: clk}).Register(mgr)
	case "aws":
		return newAWS(ctx, mgr, cfg, opts, clk, recorder, typeOverlay)
	}
	return nil, fmt.Errorf("cloud provider %q is not available; use --cloud-provider=kwok or aws", opts.CloudProvider)
}

func newAWS(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, opts *Options, clk providerClock, recorder record.EventRecorder, typeOverlay cloudprovider.TypeOverlay) (cloudprovider.CloudProvider, error) {
	logger := log.FromContext(ctx)
	clients, err := awsclient.New(ctx, awsclient.Options{Region: opts.Region})
	if err != nil {
		return nil, err
	}
	cluster, err := discoverCluster(ctx, mgr.GetAPIReader(), cfg, clients, opts)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	unavail := unavailable.New(clk, opts.UnavailableTTL).WithLog(logger.WithName("unavailable"))
	var priceList pricing.PricingAPI = clients.Pricing
	if !awsclient.HasPriceListAPI(clients.Region) {
		priceList = nil
		logger.Info("on-demand prices come from the embedded catalog: the region's partition has no Price List API", "region", clients.Region)
	}
	prices := pricing.New(pricing.Options{Pricing: priceList, EC2: clients.EC2, Region: clients.Region, Isolated: opts.IsolatedVPC, Clock: clk, Log: logger.WithName("pricing"),
		RetryInterval: opts.PriceRetryInterval})
	if err := mgr.Add(prices); err != nil {
		return nil, err
	}
	subnets := subnet.NewProvider(clients.EC2, clk, 0)
	placementGroups := placementgroup.NewProvider(clients.EC2, clk, 0)
	types := instancetype.New(instancetype.Options{EC2: clients.EC2, Region: clients.Region, Pricing: prices, Unavailable: unavail,
		VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent, ReservedENIs: opts.ReservedENIs, Clock: clk, Log: logger.WithName("instancetype"),
		// A group that cannot be read leaves the types unfiltered: the
		// class is not Ready then, and launches nothing.
		PlacementGroup: func(ctx context.Context, nc *awsv1.EC2NodeClass) (instancetype.Placement, error) {
			if g, err := placementGroups.Get(ctx, nc); err == nil && g != nil {
				return instancetype.Placement{ID: g.ID, Strategy: g.Strategy}, nil
			}
			return instancetype.Placement{}, nil
		}})
	// With the ReservedCapacity gate off, as in Karpenter, the classes'
	// capacityReservationSelectorTerms are not resolved and no launch uses
	// a reservation.
	var reservations *capacityreservation.Provider
	if opts.FeatureGates.ReservedCapacity {
		reservations = capacityreservation.NewProvider(clients.EC2, clk)
	}
	shifts, err := zonalShifts(ctx, mgr, clients, opts, clk, recorder)
	if err != nil {
		return nil, err
	}
	templates := launchtemplate.New(clients.EC2, opts.ClusterName, clk, 0)
	// Templates no launch used for a while are deleted, before they reach
	// EC2's limit per region.
	if err := mgr.Add(templates); err != nil {
		return nil, err
	}
	provider, err := awsprovider.New(awsprovider.Options{
		ClusterName: opts.ClusterName, Region: clients.Region, NodeClasses: mgr.GetClient(),
		InstanceTypes: types, Subnets: subnets, Unavailable: unavail,
		Instances:            instance.New(instance.Options{EC2: clients.EC2, ClusterName: opts.ClusterName, Clock: clk}),
		LaunchTemplates:      &awsprovider.Launcher{Templates: templates, Cluster: cluster, PlacementGroups: placementGroups, ReservationsTargeted: opts.FeatureGates.ReservedCapacity},
		PlacementGroups:      placementGroups,
		CapacityReservations: reservationCounter(reservations),
		Clock:                clk,
		Overlay:              typeOverlay,
		ZonalShifts:          shifts,
		Capacity:             types,
		Commitments:          commitmentReader(opts, clients, clk),
	})
	if err != nil {
		return nil, err
	}
	// A profile a class just left or took is spared two collections, as
	// Karpenter spares it an hour at its 30 minutes.
	profiles := &instanceprofile.Provider{IAM: clients.IAM, ClusterName: opts.ClusterName, Region: clients.Region, Clock: clk,
		ProtectFor: 2 * opts.InstanceProfileGCInterval}
	// As in Karpenter, not in an isolated VPC: IAM's endpoint is public.
	if !opts.IsolatedVPC {
		if err := mgr.Add(&nodeclass.ProfileGC{Client: mgr.GetClient(), Profiles: profiles, Clock: clk, Period: opts.InstanceProfileGCInterval}); err != nil {
			return nil, err
		}
	}
	ctrlr := &nodeclass.AWSController{
		Client: mgr.GetClient(), Clock: clk, Recorder: recorder,
		Subnets: subnets, SecurityGroups: securitygroup.NewProvider(clients.EC2, clk, 0),
		AMIs:             &amifamily.Resolver{SSM: clients.SSM, EC2: clients.EC2, Clock: clk},
		InstanceProfiles: profiles,
		LaunchTemplates:  templates, KubernetesVersion: nodeclass.KubernetesVersion(disc),
		PlacementGroups:      placementGroups,
		CapacityReservations: reservationLister(reservations),
		AMIWatch:             &nodeclass.AMIWatch{SSM: clients.SSM, Period: opts.AMIRefreshInterval},
		Resync:               opts.SubnetRefreshInterval,
		// The user's userData must merge with ours; checking it with the
		// cluster's own values finds what would fail at launch.
		Validators: []nodeclass.Validator{(&awsprovider.Launcher{Cluster: cluster}).ValidateUserData},
	}
	if err := ctrlr.Register(mgr); err != nil {
		return nil, err
	}
	if err := (&capacity.Controller{Client: mgr.GetClient(), Observer: provider}).Register(mgr); err != nil {
		return nil, err
	}
	if err := (&tagging.Controller{Client: mgr.GetClient(), Tagger: provider, Recorder: recorder}).Register(mgr); err != nil {
		return nil, err
	}
	if reservations != nil {
		if err := (&reservation.Controller{Client: mgr.GetClient(), Recorder: recorder, Clock: clk, Instances: provider}).Register(mgr); err != nil {
			return nil, err
		}
	}
	if opts.InterruptionQueue != "" {
		ic := &interruption.Controller{Client: mgr.GetClient(), SQS: clients.SQS, Queue: opts.InterruptionQueue, Unavailable: unavail,
			Recorder: recorder, Clock: clk}
		// A queue that does not exist is a setting error, found at start.
		if _, err := ic.QueueURL(ctx); err != nil {
			return nil, err
		}
		if err := mgr.Add(ic); err != nil {
			return nil, err
		}
		// EC2's status checks are read beside the queue, as Karpenter's
		// interruption controllers do: the queue carries no status check.
		if err := mgr.Add(&interruption.StatusPoller{Client: mgr.GetClient(), EC2: clients.EC2,
			Recorder: recorder, Clock: clk}); err != nil {
			return nil, err
		}
	}
	logger.Info("aws cloud provider", "region", clients.Region, "cluster-endpoint", cluster.Endpoint, "cluster-dns", cluster.DNS, "service-cidr", cluster.ServiceCIDR)
	return provider, nil
}

// discoverCluster fills what nodes need to join from the settings, and what
// they leave empty from EKS's DescribeCluster and the cluster itself, as
// Karpenter does. A value that cannot be found stops the start with the
// setting to set.
func discoverCluster(ctx context.Context, kube client.Reader, cfg *rest.Config, clients *awsclient.Clients, opts *Options) (awsprovider.Cluster, error) {
	c := awsprovider.Cluster{Name: opts.ClusterName, Endpoint: opts.ClusterEndpoint, CABundle: opts.ClusterCABundle}
	if c.Endpoint == "" || c.CABundle == "" || opts.EKSControlPlane {
		out, err := clients.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(opts.ClusterName)})
		switch {
		case err == nil && out.Cluster != nil:
			if c.Endpoint == "" {
				c.Endpoint = aws.ToString(out.Cluster.Endpoint)
			}
			if c.CABundle == "" && out.Cluster.CertificateAuthority != nil {
				c.CABundle = aws.ToString(out.Cluster.CertificateAuthority.Data)
			}
			c.ServiceCIDR = serviceCIDR(out.Cluster.KubernetesNetworkConfig)
		case c.Endpoint == "":
			return c, fmt.Errorf("missing setting CLUSTER_ENDPOINT (--cluster-endpoint): it is empty and eks:DescribeCluster for %q failed (%v); set it to the API server URL nodes join", opts.ClusterName, awsclient.ExplainPermission(err))
		}
	}
	if c.CABundle == "" && len(cfg.CAData) > 0 {
		c.CABundle = base64.StdEncoding.EncodeToString(cfg.CAData)
	}
	if c.CABundle == "" {
		return c, errors.New("missing setting CLUSTER_CA_BUNDLE (--cluster-ca-bundle): no CA from eks:DescribeCluster or the client configuration; set it to the cluster's base64 CA bundle")
	}
	dns := &corev1.Service{}
	if err := kube.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, dns); err == nil && dns.Spec.ClusterIP != "" && dns.Spec.ClusterIP != corev1.ClusterIPNone {
		c.DNS = []string{dns.Spec.ClusterIP}
	}
	return c, nil
}

// serviceCIDR is the cluster's service CIDR as EKS reports it: IPv4's, or
// IPv6's in an IPv6 cluster, which has no IPv4 one (as Karpenter reads
// it). nodeadm needs it to join AL2023 nodes; without it they never join.
func serviceCIDR(n *ekstypes.KubernetesNetworkConfigResponse) string {
	if n == nil {
		return ""
	}
	if v4 := aws.ToString(n.ServiceIpv4Cidr); v4 != "" {
		return v4
	}
	return aws.ToString(n.ServiceIpv6Cidr)
}

// zonalShifts follows the cluster's ARC zonal shifts when
// ENABLE_ZONAL_SHIFT is on: it reads them once at start, which also checks
// that ARC manages the cluster and that the role may ask, and then every
// 30 seconds on the leader. nil when off.
func zonalShifts(ctx context.Context, mgr ctrl.Manager, clients *awsclient.Clients, opts *Options, clk providerClock, recorder record.EventRecorder) (awsprovider.ZonalShifts, error) {
	if !opts.EnableZonalShift {
		return nil, nil
	}
	out, err := clients.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(opts.ClusterName)})
	if err != nil || out.Cluster == nil {
		return nil, fmt.Errorf("invalid setting ENABLE_ZONAL_SHIFT true: zonal shifts are read for the cluster's ARN, and eks:DescribeCluster of %q failed: %v", opts.ClusterName, awsclient.ExplainPermission(err))
	}
	p := &zonalshift.Provider{API: clients.ARCZonalShift, ClusterARN: aws.ToString(out.Cluster.Arn), Clock: clk,
		Log:      log.FromContext(ctx).WithName("zonalshift"),
		OnChange: (&zonalshiftevents.Events{Client: mgr.GetClient(), Recorder: recorder}).Changed}
	if err := p.Update(ctx); err != nil {
		return nil, fmt.Errorf("invalid setting ENABLE_ZONAL_SHIFT true: the cluster is not registered with ARC zonal shift, or it may not be read (%v); enable zonal shift on the cluster (eksctl's zonalShiftConfig.enabled, or aws eks update-cluster-config --zonal-shift-config enabled=true) and grant arc-zonal-shift:GetManagedResource, or set ENABLE_ZONAL_SHIFT false", awsclient.ExplainPermission(err))
	}
	return p, mgr.Add(p)
}

// commitmentReader reads the account's RIs and Savings Plans, or nothing
// in an isolated VPC: the Savings Plans endpoint is public, as the Price
// List's is.
func commitmentReader(opts *Options, clients *awsclient.Clients, clk clock.Clock) awsprovider.CommitmentReader {
	if opts.IsolatedVPC {
		return nil
	}
	return &commitments.Provider{EC2: clients.EC2, SavingsPlans: clients.SavingsPlans, Region: clients.Region, Clock: clk, Refresh: opts.CommitmentsRefreshInterval}
}

// reservationCounter and reservationLister keep a nil provider a nil
// interface, which the consumers read as "no reservations".
func reservationCounter(p *capacityreservation.Provider) awsprovider.ReservationCounter {
	if p == nil {
		return nil
	}
	return p
}

func reservationLister(p *capacityreservation.Provider) nodeclass.CapacityReservationLister {
	if p == nil {
		return nil
	}
	return p
}
