package aws

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
)

// launchCatalog: m5.large everywhere (but us-east-1c has no subnet),
// m5.xlarge with its us-east-1b spot offering out of capacity, and an
// arm64 m6g.large in us-east-1b.
func launchCatalog() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		itype("m5.large", "amd64", 2, 29,
			offering(zoneA, onDemand, 0.096), offering(zoneB, onDemand, 0.097), offering(zoneC, onDemand, 0.095),
			offering(zoneA, spot, 0.040), offering(zoneB, spot, 0.035)),
		itype("m5.xlarge", "amd64", 4, 58,
			offering(zoneA, onDemand, 0.192), offering(zoneB, onDemand, 0.193),
			offering(zoneA, spot, 0.075), unavailableOffering(zoneB, spot, 0.070)),
		itype("m6g.large", "arm64", 2, 29, offering(zoneB, onDemand, 0.077), offering(zoneB, spot, 0.030)),
	}
}

func override(it, zone string, price float64) instance.Override {
	return instance.Override{LaunchTemplate: "lt-" + it, InstanceType: it, SubnetID: subnetOf[zone], Zone: zone, ZoneID: map[string]string{zoneA: "use1-az1", zoneB: "use1-az2"}[zone], Price: price}
}

func TestCreateRequest(t *testing.T) {
	cases := []struct {
		name        string
		reqs        []v1.NodeSelectorRequirementWithMinValues
		requests    corev1.ResourceList
		noTemplate  []string
		wantCT      string
		wantAsked   []string // capacity types templates were asked for; [wantCT] when nil
		wantOver    []instance.Override
		wantICE     bool
		wantNoFleet bool
	}{{
		name:   "spot when allowed and available, every available spot offering with its zone's subnet and price",
		wantCT: spot,
		wantOver: []instance.Override{override("m5.large", zoneA, 0.040), override("m5.large", zoneB, 0.035),
			override("m5.xlarge", zoneA, 0.075), override("m6g.large", zoneB, 0.030)},
	}, {
		name:   "on-demand when the NodeClaim does not allow spot; the zone without a subnet is left out",
		reqs:   []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand)},
		wantCT: onDemand,
		wantOver: []instance.Override{override("m5.large", zoneA, 0.096), override("m5.large", zoneB, 0.097),
			override("m5.xlarge", zoneA, 0.192), override("m5.xlarge", zoneB, 0.193), override("m6g.large", zoneB, 0.077)},
	}, {
		name:     "on-demand when spot is allowed but none of its offerings is available",
		reqs:     []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge"), req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zoneB)},
		wantCT:   onDemand,
		wantOver: []instance.Override{override("m5.xlarge", zoneB, 0.193)},
	}, {
		name:     "only the NodeClaim's zones",
		reqs:     []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zoneA)},
		wantCT:   spot,
		wantOver: []instance.Override{override("m5.large", zoneA, 0.040), override("m5.xlarge", zoneA, 0.075)},
	}, {
		name:     "only the zones of the NodeClaim's zone IDs",
		reqs:     []v1.NodeSelectorRequirementWithMinValues{req(LabelZoneID, corev1.NodeSelectorOpIn, "use1-az2")},
		wantCT:   spot,
		wantOver: []instance.Override{override("m5.large", zoneB, 0.035), override("m6g.large", zoneB, 0.030)},
	}, {
		name:     "only types satisfying the requirements (a type's label)",
		reqs:     []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")},
		wantCT:   spot,
		wantOver: []instance.Override{override("m6g.large", zoneB, 0.030)},
	}, {
		name:     "only types satisfying the requirements (the type's name)",
		reqs:     []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpNotIn, "m5.large", "m6g.large")},
		wantCT:   spot,
		wantOver: []instance.Override{override("m5.xlarge", zoneA, 0.075)},
	}, {
		name:     "only types whose allocatable fits the requests",
		requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
		wantCT:   spot,
		wantOver: []instance.Override{override("m5.xlarge", zoneA, 0.075)},
	}, {
		name:       "a type without a launch template (no AMI fits it) is left out",
		noTemplate: []string{"m6g.large"},
		wantCT:     spot,
		wantOver: []instance.Override{override("m5.large", zoneA, 0.040), override("m5.large", zoneB, 0.035),
			override("m5.xlarge", zoneA, 0.075)},
	}, {
		name: "on-demand when the only available spot offering is of a type without a launch template",
		reqs: []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m6g.large", "m5.xlarge"),
			req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zoneB)},
		noTemplate: []string{"m6g.large"},
		wantCT:     onDemand,
		wantAsked:  []string{spot, onDemand},
		wantOver:   []instance.Override{override("m5.xlarge", zoneB, 0.193)},
	}, {
		name:    "offerings only in a zone without a subnet: insufficient capacity, nothing launched",
		reqs:    []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zoneC)},
		wantICE: true, wantNoFleet: true,
	}, {
		name:    "no type satisfies the requirements: insufficient capacity, nothing launched",
		reqs:    []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "p5.48xlarge")},
		wantICE: true, wantNoFleet: true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := readyClass()
			missing := map[string]bool{}
			for _, n := range tc.noTemplate {
				missing[n] = true
			}
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, templates: &fakeTemplates{missing: missing},
				instances: &fakeInstances{notFoundGets: 1 << 30}}
			p := newProvider(t, kubeWith(t, nc), f)
			claim := nodeClaim(tc.reqs...)
			claim.Spec.Resources.Requests = tc.requests
			_, _, err := createStepping(t, p, f, claim)
			if tc.wantICE != cloudprovider.IsInsufficientCapacity(err) || (!tc.wantICE && err != nil) {
				t.Fatalf("Create: %v; want insufficient capacity %v", err, tc.wantICE)
			}
			if tc.wantNoFleet {
				if len(f.instances.requests) != 0 {
					t.Fatalf("launched %+v", f.instances.requests)
				}
				return
			}
			if len(f.instances.requests) != 1 {
				t.Fatalf("%d launch requests, want 1", len(f.instances.requests))
			}
			want := instance.Request{CapacityType: tc.wantCT, Overrides: tc.wantOver, Token: "uid-1", Tags: map[string]string{
				"team": "payments", "kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": "demo",
				"karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default",
			}}
			if got := f.instances.requests[0]; !reflect.DeepEqual(got, want) {
				t.Errorf("request\n got %+v\nwant %+v", got, want)
			}
			// No template is made for a capacity type with nothing to launch.
			wantAsked := tc.wantAsked
			if wantAsked == nil {
				wantAsked = []string{tc.wantCT}
			}
			if got := f.templates.capacityTypes; !reflect.DeepEqual(got, wantAsked) {
				t.Errorf("templates asked for %v, want %v", got, wantAsked)
			}
		})
	}
}

// createStepping runs Create, moving the fake clock on whenever Create
// waits on it, and fails if Create still waits once the clock has moved
// well past TagRetry. It returns how far the clock moved.
func createStepping(t *testing.T, p *CloudProvider, f *fakes, claim *v1.NodeClaim) (*v1.NodeClaim, time.Duration, error) {
	t.Helper()
	var (
		out  *v1.NodeClaim
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		out, err = p.Create(context.Background(), claim)
	}()
	start := f.clock.Now()
	for {
		select {
		case <-done:
			return out, f.clock.Since(start), err
		default:
		}
		if f.clock.Since(start) > 4*p.opts.TagRetry {
			t.Fatalf("Create still waits after %v of the clock (TagRetry %v)", f.clock.Since(start), p.opts.TagRetry)
		}
		if f.clock.HasWaiters() {
			f.clock.Step(100 * time.Millisecond)
		} else {
			runtime.Gosched()
		}
	}
}

func TestCreateInsufficientCapacity(t *testing.T) {
	outOf := []instance.Offering{{InstanceType: "m5.large", Zone: zoneA, CapacityType: spot}, {InstanceType: "m5.large", Zone: zoneB, CapacityType: spot}}
	cases := []struct {
		name       string
		err        error
		wantICE    bool
		wantMarked []instance.Offering
		wantTypes  []string
	}{
		{"capacity error marks each offering", &instance.InsufficientCapacityError{Offerings: outOf, Message: "InsufficientInstanceCapacity"}, true, outOf, nil},
		{"capacity error through a wrap", errors.Join(errors.New("fleet"), &instance.InsufficientCapacityError{Offerings: outOf[:1]}), true, outOf[:1], nil},
		{"spot without its service-linked role marks spot out", &instance.InsufficientCapacityError{CapacityTypeOut: spot, Message: "AuthFailure.ServiceLinkedRoleCreationNotPermitted"}, true, nil, []string{spot}},
		{"another error is no capacity error", errors.New("UnauthorizedOperation: not authorized"), false, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{createErr: tc.err}}
			p := newProvider(t, kubeWith(t, readyClass()), f)
			_, _, err := createStepping(t, p, f, nodeClaim())
			if err == nil {
				t.Fatal("Create succeeded")
			}
			if cloudprovider.IsInsufficientCapacity(err) != tc.wantICE {
				t.Errorf("Create: %v; want insufficient capacity %v", err, tc.wantICE)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("Create: %v does not wrap %v", err, tc.err)
			}
			if !reflect.DeepEqual(f.unavailable.marked, tc.wantMarked) {
				t.Errorf("marked unavailable %v, want %v", f.unavailable.marked, tc.wantMarked)
			}
			if !reflect.DeepEqual(f.unavailable.types, tc.wantTypes) {
				t.Errorf("capacity types marked unavailable %v, want %v", f.unavailable.types, tc.wantTypes)
			}
		})
	}
}

// A launch call IAM refuses names the permission to grant at the start of
// the error, which the NodeClaim's condition shows cut to 300 characters.
func TestCreatePermissionDenied(t *testing.T) {
	denied := func(op string) error {
		return fmt.Errorf("creating: %w", &smithy.OperationError{ServiceID: "EC2", OperationName: op,
			Err: &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}})
	}
	cases := []struct {
		name      string
		fleet     error
		templates error
		want      string
	}{
		{"fleet", denied("CreateFleet"), nil, "not authorized to call ec2:CreateFleet (UnauthorizedOperation): allow ec2:CreateFleet in the IAM policy"},
		{"launch template", nil, denied("CreateLaunchTemplate"), "not authorized to call ec2:CreateLaunchTemplate (UnauthorizedOperation): allow ec2:CreateLaunchTemplate in the IAM policy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{createErr: tc.fleet},
				templates: &fakeTemplates{err: tc.templates}}
			p := newProvider(t, kubeWith(t, readyClass()), f)
			_, _, err := createStepping(t, p, f, nodeClaim())
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Create: %v; want it to start %q", err, tc.want)
			}
			if cloudprovider.IsInsufficientCapacity(err) || cloudprovider.IsNodeClassNotReady(err) {
				t.Errorf("a refused call is neither a capacity nor a class problem: %v", err)
			}
		})
	}
}

func TestCreateNodeClassNotReady(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	cases := []struct {
		name    string
		objects []client.Object
	}{
		{"class missing", nil},
		{"a dependent condition False", []client.Object{readyClass(setCondition(awsv1.ConditionTypeSubnetsReady, metav1.ConditionFalse))}},
		{"conditions of an older generation", []client.Object{readyClass(func(nc *awsv1.EC2NodeClass) { nc.Generation = 2 })}},
		{"class being deleted", []client.Object{readyClass(func(nc *awsv1.EC2NodeClass) {
			nc.DeletionTimestamp, nc.Finalizers = &deleted, []string{awsv1.TerminationFinalizer}
		})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}}
			p := newProvider(t, kubeWith(t, tc.objects...), f)
			_, _, err := createStepping(t, p, f, nodeClaim())
			if !cloudprovider.IsNodeClassNotReady(err) {
				t.Fatalf("Create: %v; want NodeClassNotReadyError", err)
			}
			if len(f.instances.requests) != 0 {
				t.Errorf("launched %+v", f.instances.requests)
			}
		})
	}
}

// The NodeClaim Create returns describes the launched instance; the
// instance is tagged with its NodeClaim once EC2 shows it.
func TestCreateResult(t *testing.T) {
	described := &instance.Instance{ID: "i-0123456789abcdef0", Type: "m5.xlarge", Zone: zoneA, CapacityType: spot, SubnetID: "subnet-a",
		ImageID: "ami-0described", PrivateDNS: "ip-10-0-1-23.ec2.internal", State: "running"}
	f := &fakes{
		instanceTypes: &fakeInstanceTypes{types: launchCatalog()},
		instances: &fakeInstances{notFoundGets: 2, described: map[string]*instance.Instance{described.ID: described},
			choose: func(r instance.Request) instance.Override { return r.Overrides[2] }},
	}
	nc := readyClass()
	p := newProvider(t, kubeWith(t, nc), f)
	claim := nodeClaim()
	out, _, err := createStepping(t, p, f, claim)
	if err != nil {
		t.Fatal(err)
	}
	m5xlarge := launchCatalog()[1]
	if out.Status.ProviderID != "aws:///us-east-1a/i-0123456789abcdef0" {
		t.Errorf("providerID %q", out.Status.ProviderID)
	}
	if out.Status.ImageID != "ami-0described" {
		t.Errorf("imageID %q, want the instance's", out.Status.ImageID)
	}
	wantLabels := map[string]string{
		v1.LabelNodePool: "default", "team": "payments",
		corev1.LabelInstanceTypeStable: "m5.xlarge", corev1.LabelTopologyZone: zoneA, corev1.LabelTopologyRegion: "us-east-1",
		v1.LabelCapacityType: spot, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", "karpenter.k8s.aws/instance-cpu": "4",
		// Where the instance is, as Karpenter labels it.
		LabelZoneID: "use1-az1", LabelInstanceTenancy: "default",
	}
	if !reflect.DeepEqual(out.Labels, wantLabels) {
		t.Errorf("labels\n got %v\nwant %v", out.Labels, wantLabels)
	}
	if !reflect.DeepEqual(out.Status.Capacity, m5xlarge.Capacity) || !reflect.DeepEqual(out.Status.Allocatable, m5xlarge.Allocatable) {
		t.Errorf("capacity %v allocatable %v, want m5.xlarge's", out.Status.Capacity, out.Status.Allocatable)
	}
	// Tagged at launch: the tagging controller has nothing left to do.
	wantAnnotations := map[string]string{awsv1.AnnotationEC2NodeClassHash: nc.Hash(), awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion,
		awsv1.AnnotationInstanceTagged: "true", awsv1.AnnotationInstanceProfile: "demo_1234"}
	if !reflect.DeepEqual(out.Annotations, wantAnnotations) {
		t.Errorf("annotations %v, want %v", out.Annotations, wantAnnotations)
	}
	if claim.Labels[corev1.LabelInstanceTypeStable] != "" || claim.Status.ProviderID != "" {
		t.Error("Create changed the NodeClaim it was given")
	}
	if f.instances.gets != 3 {
		t.Errorf("%d Gets, want 3 (two not found, then found)", f.instances.gets)
	}
	wantTags := []map[string]string{{"karpenter.sh/nodeclaim": "default-abcde", "Name": "ip-10-0-1-23.ec2.internal"}}
	if !reflect.DeepEqual(f.instances.tags, wantTags) {
		t.Errorf("tags %v, want %v", f.instances.tags, wantTags)
	}
	if len(f.instances.tagged) != 1 || f.instances.tagged[0] != described {
		t.Errorf("tagged %v, want the described instance (its volumes and interfaces)", f.instances.tagged)
	}
	if want := []map[string]int{{"subnet-a": 1}}; !reflect.DeepEqual(f.subnets.inflight, want) {
		t.Errorf("in-flight IPs %v, want %v", f.subnets.inflight, want)
	}
}

// EC2 may not show a new instance for a while: Create stops trying to tag
// it after TagRetry, and the launch still succeeds.
func TestCreateTagGivesUpAfterTagRetry(t *testing.T) {
	f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{notFoundGets: 1 << 30}}
	p := newProvider(t, kubeWith(t, readyClass()), f)
	out, waited, err := createStepping(t, p, f, nodeClaim())
	if err != nil {
		t.Fatalf("Create failed for an instance EC2 does not show yet: %v", err)
	}
	if waited > p.opts.TagRetry {
		t.Errorf("waited %v, more than TagRetry %v", waited, p.opts.TagRetry)
	}
	if f.instances.gets < 2 {
		t.Errorf("%d Gets; want retries within TagRetry", f.instances.gets)
	}
	if len(f.instances.tags) != 0 {
		t.Errorf("tagged %v an instance never described", f.instances.tags)
	}
	// Without a description, the result comes from the launch and the
	// class's AMI for the type.
	if out.Status.ProviderID != "aws:///us-east-1a/i-0123456789abcdef0" || out.Status.ImageID != amiAMD {
		t.Errorf("providerID %q imageID %q", out.Status.ProviderID, out.Status.ImageID)
	}
}

func TestGetListDelete(t *testing.T) {
	launched := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	inst := func(id, zone, state string) *instance.Instance {
		return &instance.Instance{ID: id, Type: "m5.large", Zone: zone, CapacityType: onDemand, ImageID: amiAMD, State: state, LaunchTime: launched,
			Tags: map[string]string{"karpenter.sh/nodeclaim": "claim-" + id, "karpenter.sh/nodepool": "default"}}
	}
	wantClaim := func(id, zone string) *v1.NodeClaim {
		return &v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "claim-" + id, CreationTimestamp: metav1.NewTime(launched), Labels: map[string]string{
				corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: zone, corev1.LabelTopologyRegion: "us-east-1",
				v1.LabelCapacityType: onDemand, v1.LabelNodePool: "default",
			}},
			Status: v1.NodeClaimStatus{ProviderID: "aws:///" + zone + "/" + id, ImageID: amiAMD},
		}
	}
	notFound := &instance.NotFoundError{ID: "i-2"}
	other := errors.New("RequestLimitExceeded")

	t.Run("Get", func(t *testing.T) {
		cases := []struct {
			name         string
			instances    *fakeInstances
			providerID   string
			want         *v1.NodeClaim
			wantNotFound bool
			wantErr      error
		}{
			{name: "found", instances: &fakeInstances{described: map[string]*instance.Instance{"i-1": inst("i-1", zoneA, "running")}},
				providerID: "aws:///us-east-1a/i-1", want: wantClaim("i-1", zoneA)},
			{name: "not found", instances: &fakeInstances{}, providerID: "aws:///us-east-1a/i-2", wantNotFound: true},
			{name: "another error passes", instances: &fakeInstances{getErr: other}, providerID: "aws:///us-east-1a/i-2", wantErr: other},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p := newProvider(t, kubeWith(t), &fakes{instances: tc.instances})
				got, err := p.Get(context.Background(), tc.providerID)
				if cloudprovider.IsNodeClaimNotFound(err) != tc.wantNotFound || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) ||
					(!tc.wantNotFound && tc.wantErr == nil && err != nil) {
					t.Fatalf("Get: %v; want not found %v, error %v", err, tc.wantNotFound, tc.wantErr)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("Get\n got %+v\nwant %+v", got, tc.want)
				}
			})
		}
	})

	t.Run("List skips ended instances and sorts by provider ID", func(t *testing.T) {
		p := newProvider(t, kubeWith(t), &fakes{instances: &fakeInstances{listed: []*instance.Instance{
			inst("i-3", zoneB, "running"), inst("i-4", zoneA, "terminated"), inst("i-1", zoneA, "pending"), inst("i-5", zoneA, "shutting-down"),
		}}})
		got, err := p.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want := []*v1.NodeClaim{wantClaim("i-1", zoneA), wantClaim("i-3", zoneB)}; !reflect.DeepEqual(got, want) {
			t.Errorf("List\n got %+v\nwant %+v", got, want)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		cases := []struct {
			name         string
			providerID   string
			deleteErr    error
			wantDeleted  []string
			wantNotFound bool
			wantErr      error
			// launchedAgo sets the Launched condition that long before now.
			launchedAgo    time.Duration
			wantTerminated []string
			// reserved: the NodeClaim ran in reservation cr-1, whose room
			// comes back once its instance is gone.
			reserved     bool
			wantReturned []string
		}{
			{name: "terminates", providerID: "aws:///us-east-1a/i-1", wantDeleted: []string{"i-1"}},
			{name: "gone", providerID: "aws:///us-east-1a/i-2", deleteErr: notFound, wantDeleted: []string{"i-2"}, wantNotFound: true},
			{name: "gone long after its launch", providerID: "aws:///us-east-1a/i-2", deleteErr: notFound, launchedAgo: time.Hour, wantDeleted: []string{"i-2"}, wantNotFound: true},
			{name: "a reserved node gone gives its reservation's room back", providerID: "aws:///us-east-1a/i-2", deleteErr: notFound, reserved: true,
				wantDeleted: []string{"i-2"}, wantNotFound: true, wantReturned: []string{"cr-1"}},
			{name: "a reserved node still terminating keeps it", providerID: "aws:///us-east-1a/i-1", reserved: true, wantDeleted: []string{"i-1"}},
			{name: "not found right after its launch: terminated by ID, not taken as gone", providerID: "aws:///us-east-1a/i-3", deleteErr: notFound,
				launchedAgo: 10 * time.Second, wantDeleted: []string{"i-3"}, wantTerminated: []string{"i-3"}},
			{name: "described as terminated right after its launch: gone", providerID: "aws:///us-east-1a/i-4", deleteErr: &instance.NotFoundError{ID: "i-4", Terminated: true},
				launchedAgo: 10 * time.Second, wantDeleted: []string{"i-4"}, wantNotFound: true},
			{name: "another error passes", providerID: "aws:///us-east-1a/i-2", deleteErr: other, wantDeleted: []string{"i-2"}, wantErr: other},
			{name: "never launched", providerID: "", wantNotFound: true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				f := &fakes{instances: &fakeInstances{deleteErr: tc.deleteErr}, reservations: &fakeReservations{room: map[string]int32{}}}
				p := newProvider(t, kubeWith(t), f)
				claim := nodeClaim()
				claim.Status.ProviderID = tc.providerID
				if tc.reserved {
					claim.Labels[v1.LabelCapacityType] = v1.CapacityTypeReserved
					claim.Labels["karpenter.k8s.aws/capacity-reservation-id"] = "cr-1"
				}
				if tc.launchedAgo > 0 {
					claim.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched",
						LastTransitionTime: metav1.NewTime(f.clock.Now().Add(-tc.launchedAgo))}}
				}
				err := p.Delete(context.Background(), claim)
				if cloudprovider.IsNodeClaimNotFound(err) != tc.wantNotFound || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) ||
					(!tc.wantNotFound && tc.wantErr == nil && err != nil) {
					t.Fatalf("Delete: %v; want not found %v, error %v", err, tc.wantNotFound, tc.wantErr)
				}
				if !reflect.DeepEqual(f.instances.deleted, tc.wantDeleted) {
					t.Errorf("deleted %v, want %v", f.instances.deleted, tc.wantDeleted)
				}
				if !reflect.DeepEqual(f.instances.terminated, tc.wantTerminated) {
					t.Errorf("terminated by ID %v, want %v", f.instances.terminated, tc.wantTerminated)
				}
				if !reflect.DeepEqual(f.reservations.returned, tc.wantReturned) {
					t.Errorf("room returned to %v, want %v", f.reservations.returned, tc.wantReturned)
				}
			})
		}
	})
}

func TestIsDrifted(t *testing.T) {
	const id = "i-0123456789abcdef0"
	running := func(change func(*instance.Instance)) *fakeInstances {
		inst := &instance.Instance{ID: id, Type: "m5.large", Zone: zoneA, ImageID: amiAMD, SubnetID: "subnet-a", SecurityGroupIDs: []string{"sg-2", "sg-1"}}
		if change != nil {
			change(inst)
		}
		return &fakeInstances{described: map[string]*instance.Instance{id: inst}}
	}
	notReady := setCondition(awsv1.ConditionTypeAMIsReady, metav1.ConditionFalse)
	cases := []struct {
		name      string
		class     *awsv1.EC2NodeClass
		hash      string // stamped on the NodeClaim; "" for the class's own
		imageID   string // the NodeClaim's; "" for amiAMD
		types     bool   // the class lists the launch catalog's types
		instances *fakeInstances
		// group is the class's placement group, claimGroup the
		// NodeClaim's placement-group-id label.
		group      *placementgroup.Group
		claimGroup string
		want       string
	}{
		{name: "in step (security groups in another order)", class: readyClass(), instances: running(nil)},
		{name: "in the class's placement group", class: readyClass(), group: &placementgroup.Group{ID: "pg-1"}, claimGroup: "pg-1", instances: running(nil)},
		{name: "the class selects another placement group", class: readyClass(), group: &placementgroup.Group{ID: "pg-2"}, claimGroup: "pg-1", instances: running(nil), want: ReasonPlacementGroupDrift},
		{name: "the class selects a placement group the node is outside", class: readyClass(), group: &placementgroup.Group{ID: "pg-2"}, instances: running(nil), want: ReasonPlacementGroupDrift},
		{name: "the class no longer selects the node's placement group", class: readyClass(), claimGroup: "pg-1", instances: running(nil), want: ReasonPlacementGroupDrift},
		{name: "the class's spec changed", class: readyClass(), hash: "another", instances: running(nil), want: awsv1.ReasonNodeClassDrift},
		{name: "the AMI is no longer the class's", class: readyClass(), imageID: "ami-0old", instances: running(nil), want: ReasonAMIDrift},
		{name: "the subnet is no longer the class's", class: readyClass(), instances: running(func(i *instance.Instance) { i.SubnetID = "subnet-old" }), want: ReasonSubnetDrift},
		{name: "a security group is gone from the class", class: readyClass(), instances: running(func(i *instance.Instance) { i.SecurityGroupIDs = []string{"sg-1", "sg-2", "sg-old"} }), want: ReasonSecurityGroupDrift},
		{name: "the class has a security group the instance lacks", class: readyClass(), instances: running(func(i *instance.Instance) { i.SecurityGroupIDs = []string{"sg-1"} }), want: ReasonSecurityGroupDrift},
		{name: "a class not ready judges no AMI, subnet or security groups", class: readyClass(notReady), imageID: "ami-0old",
			instances: running(func(i *instance.Instance) { i.SubnetID, i.SecurityGroupIDs = "subnet-old", []string{"sg-old"} })},
		{name: "a class mid-resolution (older generation) judges nothing from status", class: readyClass(func(nc *awsv1.EC2NodeClass) { nc.Generation = 2 }),
			imageID: "ami-0old", instances: running(func(i *instance.Instance) { i.SubnetID = "subnet-old" })},
		// The hash is the spec's own, not status, so it is judged whatever
		// the class's readiness, as for the kwok provider.
		{name: "a class not ready still drifts by its spec", class: readyClass(notReady), hash: "another", instances: running(nil), want: awsv1.ReasonNodeClassDrift},
		{name: "an instance that is gone has not drifted", class: readyClass(), instances: &fakeInstances{}},
		// The class's arm64 image is not the one it maps to an m5.large.
		{name: "an image of the class, but not the one for the node's type", class: readyClass(), imageID: amiARM, types: true, instances: running(nil), want: ReasonAMIDrift},
		{name: "the image the class maps to the node's type", class: readyClass(), types: true, instances: running(nil)},
		{name: "a type the class no longer lists: any image of the class", class: readyClass(), imageID: amiARM, instances: running(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakes{instances: tc.instances, placementGroup: tc.group}
			if tc.types {
				f.instanceTypes = &fakeInstanceTypes{types: launchCatalog()}
			}
			p := newProvider(t, kubeWith(t, tc.class), f)
			claim := nodeClaim()
			if claim.Labels == nil {
				claim.Labels = map[string]string{}
			}
			claim.Labels[corev1.LabelInstanceTypeStable] = "m5.large"
			if tc.claimGroup != "" {
				claim.Labels[placementgroup.LabelID] = tc.claimGroup
			}
			hash := tc.hash
			if hash == "" {
				hash = tc.class.Hash()
			}
			claim.Annotations = map[string]string{awsv1.AnnotationEC2NodeClassHash: hash, awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
			claim.Status.ProviderID = "aws:///us-east-1a/" + id
			claim.Status.ImageID = tc.imageID
			if claim.Status.ImageID == "" {
				claim.Status.ImageID = amiAMD
			}
			got, err := p.IsDrifted(context.Background(), claim)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("IsDrifted = %q, want %q", got, tc.want)
			}
			// The instance is read as recently described, not anew: drift
			// is checked on every update of every NodeClaim.
			for _, age := range tc.instances.recentAges {
				if age != time.Minute {
					t.Errorf("drift read a description up to %s old, want the default 1m", age)
				}
			}
			if tc.instances.gets != len(tc.instances.recentAges) {
				t.Errorf("%d fresh descriptions for drift, want none", tc.instances.gets-len(tc.instances.recentAges))
			}
		})
	}
	t.Run("a missing class has not drifted", func(t *testing.T) {
		p := newProvider(t, kubeWith(t), &fakes{instances: running(nil)})
		if got, err := p.IsDrifted(context.Background(), nodeClaim()); got != "" || err != nil {
			t.Errorf("IsDrifted = %q, %v", got, err)
		}
	})
}
