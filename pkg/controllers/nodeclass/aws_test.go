package nodeclass_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/mototest"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instanceprofile"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/securitygroup"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/subnet"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclass"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }

const role = "KarpenterNodeRole-demo"

var discoveryTags = map[string]string{"karpenter.sh/discovery": "demo"}

// env is one test's world: moto seeded as the guides' cluster (three
// subnets and a security group tagged karpenter.sh/discovery=demo, the node
// role), a fake API server holding the class, and the controller with the
// real subnet, security-group and instance-profile providers.
type env struct {
	t        *testing.T
	ctx      context.Context
	clients  *awsclient.Clients
	vpc      string
	subnets  []string // by free IPs, most first
	group    string
	kube     client.Client
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	amis     *fakeAMIs
	lts      *fakeLaunchTemplates
	calls    *[]string
	ctrl     *nodeclass.AWSController
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	mototest.Current().Reset(t)
	ctx := context.Background()
	clients := mototest.Clients(t, "")
	e := &env{t: t, ctx: ctx, clients: clients, clock: clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
		recorder: record.NewFakeRecorder(100), calls: &[]string{}}
	vpc, err := clients.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	e.vpc = aws.ToString(vpc.Vpc.VpcId)
	for i, zone := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		// /24, /25, /26: 251, 123 and 59 free IPs.
		e.subnets = append(e.subnets, e.createSubnet(zone, fmt.Sprintf("10.0.%d.0/%d", i+1, 24+i), discoveryTags))
	}
	g, err := clients.EC2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("demo-nodes"), Description: aws.String("nodes"),
		VpcId: aws.String(e.vpc), TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: tags(discoveryTags)}}})
	if err != nil {
		t.Fatal(err)
	}
	e.group = aws.ToString(g.GroupId)
	if _, err := clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(role),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, awsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	e.kube = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&awsv1.EC2NodeClass{}).Build()
	e.amis = &fakeAMIs{amis: []awsv1.AMI{
		{ID: "ami-amd64", Name: "al2023-amd64", Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}},
		{ID: "ami-arm64", Name: "al2023-arm64", Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}},
	}}
	e.lts = &fakeLaunchTemplates{calls: e.calls}
	discovery := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &version.Info{Major: "1", Minor: "33+"}}
	e.ctrl = &nodeclass.AWSController{Client: e.kube, Clock: e.clock, Recorder: e.recorder,
		Subnets:           subnet.NewProvider(clients.EC2, e.clock, 0),
		SecurityGroups:    securitygroup.NewProvider(clients.EC2, e.clock, 0),
		AMIs:              e.amis,
		InstanceProfiles:  &recordingProfiles{Provider: &instanceprofile.Provider{IAM: clients.IAM, ClusterName: "demo", Region: "us-east-1"}, calls: e.calls},
		LaunchTemplates:   e.lts,
		KubernetesVersion: nodeclass.KubernetesVersion(discovery),
	}
	return e
}

func (e *env) createSubnet(zone, cidr string, tg map[string]string) string {
	e.t.Helper()
	out, err := e.clients.EC2.CreateSubnet(e.ctx, &ec2.CreateSubnetInput{VpcId: aws.String(e.vpc), AvailabilityZone: aws.String(zone), CidrBlock: aws.String(cidr),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: tags(tg)}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return aws.ToString(out.Subnet.SubnetId)
}

func tags(m map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for k, v := range m {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return out
}

type fakeAMIs struct {
	amis    []awsv1.AMI
	err     error
	version string
}

func (f *fakeAMIs) Resolve(_ context.Context, _ *awsv1.EC2NodeClass, k8sVersion string) ([]awsv1.AMI, error) {
	f.version = k8sVersion
	return f.amis, f.err
}

type fakeLaunchTemplates struct {
	err   error
	calls *[]string
}

func (f *fakeLaunchTemplates) DeleteForNodeClass(_ context.Context, name string) error {
	*f.calls = append(*f.calls, "launchtemplates:"+name)
	return f.err
}

type recordingProfiles struct {
	*instanceprofile.Provider
	calls *[]string
}

func (r *recordingProfiles) Delete(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	err := r.Provider.Delete(ctx, nc)
	*r.calls = append(*r.calls, fmt.Sprintf("instanceprofile:%s:%v", nc.Name, err == nil))
	return err
}

// guideClass is the guides' EC2NodeClass.
func guideClass() *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       role,
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discoveryTags}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discoveryTags}},
	}}
}

func (e *env) reconcile() (reconcile.Result, error) {
	e.t.Helper()
	return e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "default"}})
}

func (e *env) get() *awsv1.EC2NodeClass {
	e.t.Helper()
	nc := &awsv1.EC2NodeClass{}
	if err := e.kube.Get(e.ctx, types.NamespacedName{Name: "default"}, nc); err != nil {
		e.t.Fatal(err)
	}
	return nc
}

// want is what a condition must say: its status, its reason, and text its
// message must contain.
type want struct {
	status  metav1.ConditionStatus
	reason  string
	message []string
}

func checkConditions(t *testing.T, nc *awsv1.EC2NodeClass, wants map[string]want) {
	t.Helper()
	for typ, w := range wants {
		c := meta.FindStatusCondition(nc.Status.Conditions, typ)
		if c == nil {
			t.Errorf("no %s condition", typ)
			continue
		}
		if c.Status != w.status || (w.reason != "" && c.Reason != w.reason) {
			t.Errorf("%s = %s/%s %q, want %s/%s", typ, c.Status, c.Reason, c.Message, w.status, w.reason)
		}
		for _, m := range w.message {
			if !strings.Contains(c.Message, m) {
				t.Errorf("%s message %q lacks %q", typ, c.Message, m)
			}
		}
		if c.ObservedGeneration != nc.Generation {
			t.Errorf("%s observed generation %d, class is at %d", typ, c.ObservedGeneration, nc.Generation)
		}
	}
}

func allTrue() map[string]want {
	out := map[string]want{}
	for _, t := range append([]string{awsv1.ConditionTypeReady}, awsv1.ReadyDependents...) {
		out[t] = want{status: metav1.ConditionTrue, reason: t}
	}
	return out
}

// The guides' class resolves to its three subnets, its security group,
// the AMIs and an instance profile for its role, and is Ready.
func TestReady(t *testing.T) {
	e := newEnv(t, guideClass())
	res, err := e.reconcile()
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != nodeclass.ResyncPeriod {
		t.Errorf("requeue after %v, want %v", res.RequeueAfter, nodeclass.ResyncPeriod)
	}
	nc := e.get()
	checkConditions(t, nc, allTrue())
	var ids, zones []string
	for _, s := range nc.Status.Subnets {
		ids, zones = append(ids, s.ID), append(zones, s.Zone)
		if s.ZoneID == "" {
			t.Errorf("subnet %s has no zone ID", s.ID)
		}
	}
	if !reflect.DeepEqual(ids, e.subnets) || !reflect.DeepEqual(zones, []string{"us-east-1a", "us-east-1b", "us-east-1c"}) {
		t.Errorf("subnets %v in %v, want %v (most free IPs first)", ids, zones, e.subnets)
	}
	if want := []awsv1.SecurityGroup{{ID: e.group, Name: "demo-nodes"}}; !reflect.DeepEqual(nc.Status.SecurityGroups, want) {
		t.Errorf("security groups %v, want %v", nc.Status.SecurityGroups, want)
	}
	if !reflect.DeepEqual(nc.Status.AMIs, e.amis.amis) {
		t.Errorf("amis %v", nc.Status.AMIs)
	}
	if e.amis.version != "1.33" {
		t.Errorf("AMIs resolved for Kubernetes %q, want 1.33", e.amis.version)
	}
	profile := instanceprofile.Name("demo", "us-east-1", "default", role)
	if nc.Status.InstanceProfile != profile {
		t.Errorf("instance profile %q, want %q", nc.Status.InstanceProfile, profile)
	}
	out, err := e.clients.IAM.GetInstanceProfile(e.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)})
	if err != nil || len(out.InstanceProfile.Roles) != 1 || aws.ToString(out.InstanceProfile.Roles[0].RoleName) != role {
		t.Errorf("profile in IAM: %v %+v", err, out)
	}
	if !hasFinalizer(nc) {
		t.Error("no termination finalizer")
	}
	if nc.Annotations[awsv1.AnnotationEC2NodeClassHash] != nc.Hash() || nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
		t.Errorf("hash annotations %v, want %s under %s", nc.Annotations, nc.Hash(), awsv1.EC2NodeClassHashVersion)
	}
	if status, _, _ := nc.Readiness(); status != metav1.ConditionTrue {
		t.Error("Readiness disagrees with the Ready condition")
	}
	// A second pass changes nothing, not even a transition time.
	e.clock.Step(time.Minute)
	if _, err := e.reconcile(); err != nil {
		t.Fatal(err)
	}
	if again := e.get(); !reflect.DeepEqual(again.Status, nc.Status) {
		t.Errorf("status changed on a second pass:\n%+v\n%+v", nc.Status, again.Status)
	}
}

func hasFinalizer(nc *awsv1.EC2NodeClass) bool {
	for _, f := range nc.Finalizers {
		if f == awsv1.TerminationFinalizer {
			return true
		}
	}
	return false
}

// Each thing that keeps a class from Ready is named in its condition, and
// Ready says which condition.
func TestNotReady(t *testing.T) {
	dependencies := want{status: metav1.ConditionFalse, reason: "DependenciesNotReady", message: []string{"Awaiting AMI, Instance Profile, Security Group, and Subnet resolution"}}
	cases := []struct {
		name string
		edit func(*awsv1.EC2NodeClass)
		// before runs after the world is seeded.
		before func(e *env)
		conds  map[string]want
		// wantErr: the reconcile returns an error (retried with backoff);
		// otherwise it requeues after NotReadyPeriod.
		wantErr bool
		check   func(t *testing.T, nc *awsv1.EC2NodeClass)
	}{
		{name: "subnet selector matches nothing",
			edit: func(nc *awsv1.EC2NodeClass) {
				nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "typo"}}}
			},
			conds: map[string]want{
				awsv1.ConditionTypeSubnetsReady: {status: metav1.ConditionFalse, reason: "SubnetsNotFound",
					message: []string{"SubnetSelector did not match any Subnets", "subnetSelectorTerms[0] {tags: karpenter.sh/discovery=typo}"}},
				awsv1.ConditionTypeReady:               {status: metav1.ConditionFalse, reason: "UnhealthyDependents", message: []string{"SubnetsReady=False"}},
				awsv1.ConditionTypeValidationSucceeded: dependencies,
				awsv1.ConditionTypeSecurityGroupsReady: {status: metav1.ConditionTrue},
			},
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				if nc.Status.Subnets != nil {
					t.Errorf("subnets %v, want none", nc.Status.Subnets)
				}
			}},
		{name: "security group selector matches nothing",
			edit: func(nc *awsv1.EC2NodeClass) {
				nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: "nope"}}
			},
			conds: map[string]want{
				awsv1.ConditionTypeSecurityGroupsReady: {status: metav1.ConditionFalse, reason: "SecurityGroupsNotFound",
					message: []string{"SecurityGroupSelector did not match any SecurityGroups", "securityGroupSelectorTerms[0] {name: nope}"}},
				awsv1.ConditionTypeReady: {status: metav1.ConditionFalse, reason: "UnhealthyDependents", message: []string{"SecurityGroupsReady=False"}},
			}},
		{name: "AMI selector matches nothing",
			before: func(e *env) { e.amis.amis = nil },
			conds: map[string]want{
				awsv1.ConditionTypeAMIsReady: {status: metav1.ConditionFalse, reason: "AMINotFound", message: []string{"AMISelector did not match any AMIs"}},
				awsv1.ConditionTypeReady:     {status: metav1.ConditionFalse, message: []string{"AMIsReady=False"}},
			}},
		{name: "AMI resolver names what matched nothing",
			before: func(e *env) {
				e.amis.err = reasoned{reason: "AMINotFound", msg: "amiSelectorTerms[0] {alias: al2023@v20990101}: no such AMI version"}
			},
			conds: map[string]want{
				awsv1.ConditionTypeAMIsReady: {status: metav1.ConditionFalse, reason: "AMINotFound", message: []string{"al2023@v20990101"}},
			},
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				if nc.Status.AMIs != nil {
					t.Errorf("amis %v, want none", nc.Status.AMIs)
				}
			}},
		{name: "role does not exist",
			edit: func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = "KarpenterNodeRole-typo" },
			conds: map[string]want{
				awsv1.ConditionTypeInstanceProfileReady: {status: metav1.ConditionFalse, reason: "RoleNotFound",
					message: []string{`spec.role: "KarpenterNodeRole-typo" does not exist`, "create the role"}},
				awsv1.ConditionTypeReady:               {status: metav1.ConditionFalse, message: []string{"InstanceProfileReady=False"}},
				awsv1.ConditionTypeValidationSucceeded: dependencies,
			}},
		{name: "placement group does not exist",
			edit: func(nc *awsv1.EC2NodeClass) {
				nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: "training"}
			},
			before: func(e *env) {
				e.ctrl.PlacementGroups = fakePlacementGroups{err: &placementgroup.NotFoundError{Selector: "training"}}
			},
			conds: map[string]want{
				awsv1.ConditionTypePlacementGroupReady: {status: metav1.ConditionFalse, reason: "PlacementGroupNotFound",
					message: []string{`Placement group "training" not found`, "spec.placementGroupSelector"}},
				awsv1.ConditionTypeReady: {status: metav1.ConditionFalse, message: []string{"PlacementGroupReady=False"}},
			}},
		{name: "explicit instance profile does not exist",
			edit: func(nc *awsv1.EC2NodeClass) { nc.Spec.Role, nc.Spec.InstanceProfile = "", aws.String("MyProfile") },
			conds: map[string]want{
				awsv1.ConditionTypeInstanceProfileReady: {status: metav1.ConditionFalse, reason: "InstanceProfileNotFound",
					message: []string{`spec.instanceProfile: "MyProfile" does not exist`}},
			}},
		{name: "EC2 refuses DescribeSubnets", wantErr: true,
			before: func(e *env) {
				mototest.Current().Fail("ec2", "DescribeSubnets", "UnauthorizedOperation", "You are not authorized to perform this operation.")
			},
			conds: map[string]want{
				awsv1.ConditionTypeSubnetsReady: {status: metav1.ConditionFalse, reason: "UnauthorizedOperation",
					message: []string{"not authorized to call ec2:DescribeSubnets (UnauthorizedOperation): allow ec2:DescribeSubnets in the IAM policy", "You are not authorized to perform this operation."}},
				awsv1.ConditionTypeSecurityGroupsReady: {status: metav1.ConditionTrue},
				awsv1.ConditionTypeReady:               {status: metav1.ConditionFalse, message: []string{"SubnetsReady=False"}},
			}},
		{name: "EC2 refuses DescribeSecurityGroups", wantErr: true,
			before: func(e *env) {
				mototest.Current().Fail("ec2", "DescribeSecurityGroups", "UnauthorizedOperation", "You are not authorized to perform this operation.")
			},
			conds: map[string]want{
				awsv1.ConditionTypeSecurityGroupsReady: {status: metav1.ConditionFalse, reason: "UnauthorizedOperation", message: []string{"not authorized"}},
			}},
		{name: "IAM denies GetInstanceProfile", wantErr: true,
			before: func(e *env) {
				mototest.Current().Fail("iam", "GetInstanceProfile", "AccessDenied", "User: arn:aws:sts::123456789012:assumed-role/joiner is not authorized to perform: iam:GetInstanceProfile")
			},
			conds: map[string]want{
				awsv1.ConditionTypeInstanceProfileReady: {status: metav1.ConditionFalse, reason: "AccessDenied", message: []string{"allow iam:GetInstanceProfile in the IAM policy"}},
				awsv1.ConditionTypeReady:                {status: metav1.ConditionFalse, message: []string{"InstanceProfileReady=False"}},
			}},
		{name: "AMI resolution fails with an AWS error", wantErr: true,
			before: func(e *env) {
				e.amis.err = &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: ssm:GetParameter"}
			},
			conds: map[string]want{
				awsv1.ConditionTypeAMIsReady: {status: metav1.ConditionFalse, reason: "AccessDeniedException", message: []string{"ssm:GetParameter", "in the IAM policy"}},
			}},
		{name: "Kubernetes version unknown", wantErr: true,
			before: func(e *env) {
				e.ctrl.KubernetesVersion = func(context.Context) (string, error) { return "", errors.New("connection refused") }
			},
			conds: map[string]want{
				awsv1.ConditionTypeAMIsReady: {status: metav1.ConditionFalse, reason: "KubernetesVersionUnknown", message: []string{"connection refused"}},
			}},
		{name: "a validator fails",
			before: func(e *env) {
				e.ctrl.Validators = []nodeclass.Validator{func(context.Context, *awsv1.EC2NodeClass) error {
					return reasoned{reason: "UserDataInvalid", msg: "spec.userData: not a MIME multi-part archive"}
				}}
			},
			conds: map[string]want{
				awsv1.ConditionTypeValidationSucceeded: {status: metav1.ConditionFalse, reason: "UserDataInvalid", message: []string{"spec.userData"}},
				awsv1.ConditionTypeSubnetsReady:        {status: metav1.ConditionTrue},
				awsv1.ConditionTypeReady:               {status: metav1.ConditionFalse, message: []string{"ValidationSucceeded=False"}},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := guideClass()
			if tc.edit != nil {
				tc.edit(nc)
			}
			e := newEnv(t, nc)
			if tc.before != nil {
				tc.before(e)
			}
			res, err := e.reconcile()
			if tc.wantErr {
				if err == nil {
					t.Error("want an error, to retry with backoff")
				}
			} else if err != nil || res.RequeueAfter != nodeclass.NotReadyPeriod {
				t.Errorf("got (%+v, %v), want a requeue after %v", res, err, nodeclass.NotReadyPeriod)
			}
			got := e.get()
			checkConditions(t, got, tc.conds)
			if status, _, _ := got.Readiness(); status == metav1.ConditionTrue {
				t.Error("Readiness says ready")
			}
			if tc.check != nil {
				tc.check(t, got)
			}
			// Fixed, the class becomes Ready on its own.
			mototest.Current().Heal()
		})
	}
}

type reasoned struct{ reason, msg string }

func (r reasoned) Error() string  { return r.msg }
func (r reasoned) Reason() string { return r.reason }

type failingSubnets struct{ err error }

func (f failingSubnets) List(context.Context, *awsv1.EC2NodeClass) ([]ec2types.Subnet, error) {
	return nil, f.err
}

func TestKubernetesVersion(t *testing.T) {
	cases := []struct {
		major, minor, want, err string
	}{
		{"1", "33", "1.33", ""},
		{"1", "33+", "1.33", ""},
		{"1", "", "", "not a major.minor"},
	}
	for _, tc := range cases {
		d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &version.Info{Major: tc.major, Minor: tc.minor}}
		got, err := nodeclass.KubernetesVersion(d)(context.Background())
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s.%s: got %q, %v", tc.major, tc.minor, got, err)
		}
	}
}

type fakePlacementGroups struct {
	group *placementgroup.Group
	err   error
}

func (f fakePlacementGroups) Get(context.Context, *awsv1.EC2NodeClass) (*placementgroup.Group, error) {
	return f.group, f.err
}

type fakeReservations struct {
	list []awsv1.CapacityReservation
	err  error
}

func (f fakeReservations) List(context.Context, *awsv1.EC2NodeClass) ([]awsv1.CapacityReservation, error) {
	return f.list, f.err
}
