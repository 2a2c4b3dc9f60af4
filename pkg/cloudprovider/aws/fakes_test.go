package aws

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/amifamily"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/launchtemplate"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
)

// The world of these tests: a class with a subnet in us-east-1a and
// us-east-1b (none in us-east-1c), two security groups, and an amd64 AMI
// and an arm64 one.
const (
	zoneA, zoneB, zoneC = "us-east-1a", "us-east-1b", "us-east-1c"
	amiAMD, amiARM      = "ami-0amd64", "ami-0arm64"
	spot, onDemand      = instance.CapacityTypeSpot, instance.CapacityTypeOnDemand
)

var subnetOf = map[string]string{zoneA: "subnet-a", zoneB: "subnet-b"}

func amiOf(id, arch string) awsv1.AMI {
	return awsv1.AMI{ID: id, Requirements: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
		{Key: amifamily.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
	}}
}

// readyClass is the guides' class as its controller resolves it, Ready
// for its generation; change adjusts it.
func readyClass(change ...func(*awsv1.EC2NodeClass)) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1},
		Spec: awsv1.EC2NodeClassSpec{
			AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:             "KarpenterNodeRole-demo",
			Tags:             map[string]string{"team": "payments"},
		},
		Status: awsv1.EC2NodeClassStatus{
			Subnets:         []awsv1.Subnet{{ID: "subnet-a", Zone: zoneA, ZoneID: "use1-az1"}, {ID: "subnet-b", Zone: zoneB, ZoneID: "use1-az2"}},
			SecurityGroups:  []awsv1.SecurityGroup{{ID: "sg-1"}, {ID: "sg-2"}},
			AMIs:            []awsv1.AMI{amiOf(amiAMD, "amd64"), amiOf(amiARM, "arm64")},
			InstanceProfile: "demo_1234",
		},
	}
	for _, t := range awsv1.ReadyDependents {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, ObservedGeneration: 1, Reason: t})
	}
	for _, c := range change {
		c(nc)
	}
	return nc
}

// setCondition sets one of the class's conditions.
func setCondition(t string, status metav1.ConditionStatus) func(*awsv1.EC2NodeClass) {
	return func(nc *awsv1.EC2NodeClass) {
		for i := range nc.Status.Conditions {
			if nc.Status.Conditions[i].Type == t {
				nc.Status.Conditions[i].Status = status
			}
		}
	}
}

func kubeWith(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := awsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func offering(zone, capacityType string, price float64) cloudprovider.Offering {
	return cloudprovider.Offering{Zone: zone, CapacityType: capacityType, Price: price, Available: true}
}

func unavailableOffering(zone, capacityType string, price float64) cloudprovider.Offering {
	o := offering(zone, capacityType, price)
	o.Available = false
	return o
}

// itype is an instance type with cpus vCPUs, 4 GiB per vCPU and pods
// pods, and the kube-reserved the EKS AMIs' formula gives it.
func itype(name, arch string, cpus, pods int64, offerings ...cloudprovider.Offering) *cloudprovider.InstanceType {
	mem := resource.NewQuantity(cpus*4<<30, resource.BinarySI)
	reserved := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(60+10*cpus, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity((11*pods+255)<<20, resource.BinarySI),
	}
	allocCPU := resource.NewMilliQuantity(cpus*1000, resource.DecimalSI)
	allocCPU.Sub(reserved[corev1.ResourceCPU])
	allocMem := mem.DeepCopy()
	allocMem.Sub(reserved[corev1.ResourceMemory])
	return &cloudprovider.InstanceType{
		Name: name,
		Labels: map[string]string{
			corev1.LabelInstanceTypeStable:   name,
			corev1.LabelArchStable:           arch,
			corev1.LabelOSStable:             "linux",
			"karpenter.k8s.aws/instance-cpu": fmt.Sprint(cpus),
		},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpus, resource.DecimalSI),
			corev1.ResourceMemory: *mem,
			corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
		},
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    *allocCPU,
			corev1.ResourceMemory: allocMem,
			corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
		},
		KubeReserved: reserved,
		Offerings:    offerings,
	}
}

type fakeInstanceTypes struct {
	types []*cloudprovider.InstanceType
	// observed are the memories ObserveMemory was told, by type.
	observed map[string]string
}

func (f *fakeInstanceTypes) ObserveMemory(instanceType string, _ *awsv1.EC2NodeClass, memory resource.Quantity) bool {
	if f.observed == nil {
		f.observed = map[string]string{}
	}
	f.observed[instanceType] = memory.String()
	return true
}

func (f *fakeInstanceTypes) List(context.Context, *awsv1.EC2NodeClass) ([]*cloudprovider.InstanceType, error) {
	return f.types, nil
}

// fakeInstances launches into the override of the request that its choose
// picks (the first by default), and answers Get from its described
// instances after notFoundGets not-found answers, as EC2's eventual
// consistency does.
type fakeInstances struct {
	createErr error
	// outOfCapacity are the offerings the launch fell through.
	outOfCapacity []instance.Offering
	choose        func(instance.Request) instance.Override
	notFoundGets  int
	described     map[string]*instance.Instance
	// fresh, when it names an instance, is what Get (a new description)
	// says of it; Recent answers with described.
	fresh     map[string]*instance.Instance
	getErr    error
	listed    []*instance.Instance
	deleteErr error
	// earlier is what an unrecorded earlier attempt launched, for Launched.
	earlier *instance.Instance

	mu       sync.Mutex
	requests []instance.Request
	gets     int
	// recentAges are the max ages Recent was asked with.
	recentAges []time.Duration
	tags       []map[string]string
	tagged     []*instance.Instance
	deleted    []string
	// resumes are the NodeClaims Launched was asked about, with since.
	resumes []string
	// terminated are the IDs Terminate was asked to end.
	terminated []string
}

func (f *fakeInstances) Create(_ context.Context, req instance.Request) (*instance.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if f.createErr != nil {
		return nil, f.createErr
	}
	o := req.Overrides[0]
	if f.choose != nil {
		o = f.choose(req)
	}
	return &instance.Instance{ID: "i-0123456789abcdef0", Type: o.InstanceType, Zone: o.Zone, SubnetID: o.SubnetID,
		CapacityType: req.CapacityType, State: "pending", Tags: req.Tags, OutOfCapacity: f.outOfCapacity}, nil
}

func (f *fakeInstances) Launched(_ context.Context, claim, _ string, since time.Time, fits func(*instance.Instance) bool) (*instance.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumes = append(f.resumes, claim+" since "+since.UTC().Format(time.RFC3339))
	if f.earlier != nil && fits(f.earlier) {
		return f.earlier, nil
	}
	return nil, nil
}

func (f *fakeInstances) Get(_ context.Context, id string) (*instance.Instance, error) {
	return f.get(id, true)
}

// Recent answers with described, never fresh: a description made earlier.
func (f *fakeInstances) Recent(_ context.Context, id string, maxAge time.Duration) (*instance.Instance, error) {
	f.mu.Lock()
	f.recentAges = append(f.recentAges, maxAge)
	f.mu.Unlock()
	return f.get(id, false)
}

func (f *fakeInstances) get(id string, anew bool) (*instance.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.getErr != nil {
		return nil, f.getErr
	}
	if anew && f.fresh[id] != nil {
		return f.fresh[id], nil
	}
	if f.gets <= f.notFoundGets || f.described[id] == nil {
		return nil, &instance.NotFoundError{ID: id}
	}
	return f.described[id], nil
}

func (f *fakeInstances) List(context.Context) ([]*instance.Instance, error) { return f.listed, nil }

func (f *fakeInstances) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, id)
	return f.deleteErr
}

func (f *fakeInstances) Terminate(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminated = append(f.terminated, id)
	return nil
}

func (f *fakeInstances) Tag(_ context.Context, inst *instance.Instance, tags map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tagged = append(f.tagged, inst)
	f.tags = append(f.tags, tags)
	return nil
}

// fakeSubnets has subnetOf's subnets.
type fakeSubnets struct {
	mu       sync.Mutex
	asked    [][]string
	inflight []map[string]int
}

func (f *fakeSubnets) ZonalForLaunch(_ context.Context, _ *awsv1.EC2NodeClass, zones []string) (map[string]ec2types.Subnet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, zones)
	out := map[string]ec2types.Subnet{}
	for _, z := range zones {
		if id, ok := subnetOf[z]; ok {
			out[z] = ec2types.Subnet{SubnetId: aws.String(id), AvailabilityZone: aws.String(z)}
		}
	}
	return out, nil
}

func (f *fakeSubnets) UpdateInflightIPs(ips map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight = append(f.inflight, ips)
}

type fakeUnavailable struct {
	marked []instance.Offering
	// types are the capacity types marked out whole.
	types []string
	// inGroup are the offerings marked out for one placement group, by
	// group.
	inGroup map[string][]instance.Offering
}

func (f *fakeUnavailable) MarkUnavailableIn(group, instanceType, zone, capacityType, reason string) {
	if group == "" {
		f.MarkUnavailable(instanceType, zone, capacityType, reason)
		return
	}
	if f.inGroup == nil {
		f.inGroup = map[string][]instance.Offering{}
	}
	f.inGroup[group] = append(f.inGroup[group], instance.Offering{InstanceType: instanceType, Zone: zone, CapacityType: capacityType})
}

func (f *fakeUnavailable) MarkCapacityTypeUnavailable(capacityType, _ string) {
	f.types = append(f.types, capacityType)
}

func (f *fakeUnavailable) MarkUnavailable(instanceType, zone, capacityType, _ string) {
	f.marked = append(f.marked, instance.Offering{InstanceType: instanceType, Zone: zone, CapacityType: capacityType})
}

// fakeTemplates gives every type a template of its name, but none to the
// types in missing (as for a type no AMI fits).
type fakeTemplates struct {
	missing       map[string]bool
	capacityTypes []string
	err           error
	forgotten     []string
}

func (f *fakeTemplates) Forget(names []string) { f.forgotten = append(f.forgotten, names...) }

func (f *fakeTemplates) ForReservation(_ context.Context, _ *awsv1.EC2NodeClass, _ *v1.NodeClaim, it *cloudprovider.InstanceType, r awsv1.CapacityReservation) (string, error) {
	f.capacityTypes = append(f.capacityTypes, v1.CapacityTypeReserved)
	if f.err != nil {
		return "", f.err
	}
	if f.missing[it.Name] {
		return "", nil
	}
	return "lt-" + it.Name + "-" + r.ID, nil
}

func (f *fakeTemplates) ForLaunch(_ context.Context, _ *awsv1.EC2NodeClass, _ *v1.NodeClaim, its []*cloudprovider.InstanceType, capacityType string) (map[string]string, error) {
	f.capacityTypes = append(f.capacityTypes, capacityType)
	if f.err != nil {
		return nil, f.err
	}
	out := map[string]string{}
	for _, it := range its {
		if !f.missing[it.Name] {
			out[it.Name] = "lt-" + it.Name
		}
	}
	return out, nil
}

// fakeEnsurer records the inputs and names each template by its order.
type fakeEnsurer struct{ inputs []launchtemplate.Input }

func (f *fakeEnsurer) Invalidate(string) {}

func (f *fakeEnsurer) Ensure(_ context.Context, in launchtemplate.Input) (launchtemplate.LaunchTemplate, error) {
	f.inputs = append(f.inputs, in)
	name := fmt.Sprintf("lt-%d", len(f.inputs))
	return launchtemplate.LaunchTemplate{ID: name, Name: name}, nil
}

// fakes is a provider on fakes.
type fakes struct {
	instanceTypes *fakeInstanceTypes
	instances     *fakeInstances
	subnets       *fakeSubnets
	unavailable   *fakeUnavailable
	templates     *fakeTemplates
	clock         *clocktesting.FakeClock
	// placementGroup is every class's group; nil for none.
	placementGroup *placementgroup.Group
	// reservations count the reservations' room; nil for none.
	reservations *fakeReservations
}

type fakeReservations struct {
	room      map[string]int32
	launched  []string
	exhausted []string
	returned  []string
}

func (f *fakeReservations) Returned(id string) { f.returned = append(f.returned, id); f.room[id]++ }

func (f *fakeReservations) Available(id string) int32 { return f.room[id] }
func (f *fakeReservations) Launched(id string)        { f.launched = append(f.launched, id); f.room[id]-- }
func (f *fakeReservations) Exhausted(id string) {
	f.exhausted = append(f.exhausted, id)
	f.room[id] = 0
}

type fakePlacementGroups struct{ group *placementgroup.Group }

func (f fakePlacementGroups) Get(context.Context, *awsv1.EC2NodeClass) (*placementgroup.Group, error) {
	return f.group, nil
}

func newProvider(t *testing.T, kube client.Client, f *fakes) *CloudProvider {
	t.Helper()
	if f.instanceTypes == nil {
		f.instanceTypes = &fakeInstanceTypes{}
	}
	if f.instances == nil {
		f.instances = &fakeInstances{}
	}
	if f.templates == nil {
		f.templates = &fakeTemplates{}
	}
	f.subnets, f.unavailable = &fakeSubnets{}, &fakeUnavailable{}
	f.clock = clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{
		ClusterName: "demo", Region: "us-east-1", NodeClasses: kube,
		InstanceTypes: f.instanceTypes, Instances: f.instances, Subnets: f.subnets, Unavailable: f.unavailable,
		LaunchTemplates: f.templates, Clock: f.clock, TagRetry: 30 * time.Second,
		PlacementGroups: fakePlacementGroups{f.placementGroup}, Capacity: f.instanceTypes,
	}
	if f.reservations != nil {
		opts.CapacityReservations = f.reservations
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func nodeClaim(reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", UID: "uid-1", Labels: map[string]string{v1.LabelNodePool: "default", "team": "payments"}},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: reqs,
		},
	}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}
