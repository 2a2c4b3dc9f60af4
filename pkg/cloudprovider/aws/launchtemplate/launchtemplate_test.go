package launchtemplate

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/internal/mototest"
)

func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }

// counting forwards to moto and counts the calls by action.
type counting struct {
	EC2API
	mu    sync.Mutex
	calls map[string]int
}

func newCounting(api EC2API) *counting { return &counting{EC2API: api, calls: map[string]int{}} }

func (c *counting) count(action string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[action]++
}

func (c *counting) get(action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[action]
}

func (c *counting) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	c.count("Create")
	return c.EC2API.CreateLaunchTemplate(ctx, in, opts...)
}

func (c *counting) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	c.count("Describe")
	return c.EC2API.DescribeLaunchTemplates(ctx, in, opts...)
}

// reset empties moto for a test and gives the product's EC2 client on it.
// ensureAndRead makes the template for in and reads its data back from EC2.
func ensureAndRead(t *testing.T, p *Provider, api *ec2.Client, in Input) (LaunchTemplate, *ec2types.ResponseLaunchTemplateData) {
	t.Helper()
	ctx := context.Background()
	lt, err := p.Ensure(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := api.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(lt.ID)})
	if err != nil || len(out.LaunchTemplateVersions) != 1 {
		t.Fatalf("versions: %v, %v", out, err)
	}
	return lt, out.LaunchTemplateVersions[0].LaunchTemplateData
}

func reset(t *testing.T) *ec2.Client {
	t.Helper()
	mototest.Current().Reset(t)
	return mototest.Clients(t, "").EC2
}

func input() Input {
	return Input{
		NodeClassName:    "default",
		NodeClassHash:    "1234",
		NodePool:         "general",
		CapacityType:     "on-demand",
		AMIFamily:        awsv1.AMIFamilyAL2023,
		ImageID:          "ami-0123456789abcdef0",
		UserData:         "IyEvYmluL2Jhc2gK",
		SecurityGroupIDs: []string{"sg-2", "sg-1"},
		InstanceProfile:  "demo_1234567890",
		Tags:             map[string]string{"team": "payments"},
	}
}

func TestEnsureCreatesOnce(t *testing.T) {
	motoEC2 := reset(t)
	ctx := context.Background()
	api := newCounting(motoEC2)
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	p := New(api, "demo", clk, time.Minute)

	first, err := p.Ensure(ctx, input())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Name, NamePrefix) || !strings.HasPrefix(first.ID, "lt-") {
		t.Fatalf("template %+v", first)
	}
	again, err := p.Ensure(ctx, input())
	if err != nil || again != first {
		t.Fatalf("second Ensure: %+v, %v", again, err)
	}
	if n := api.get("Create") + api.get("Describe"); n != 1 {
		t.Errorf("a known template costs no call; %d calls", n)
	}

	// Reordered security groups are the same configuration.
	in := input()
	in.SecurityGroupIDs = []string{"sg-1", "sg-2"}
	if same, err := p.Ensure(ctx, in); err != nil || same != first {
		t.Errorf("reordered security groups gave %+v, %v", same, err)
	}

	// A restarted process knows nothing, and finds the template EC2 has.
	restarted := New(newCounting(motoEC2), "demo", clk, time.Minute)
	if found, err := restarted.Ensure(ctx, input()); err != nil || found != first {
		t.Errorf("after a restart: %+v, %v; want %+v", found, err, first)
	}

	// Past the TTL the template is asked for again, and found.
	clk.Step(time.Minute)
	if found, err := p.Ensure(ctx, input()); err != nil || found != first {
		t.Errorf("after the TTL: %+v, %v", found, err)
	}
	if api.get("Create") != 2 || api.get("Describe") != 1 {
		t.Errorf("after the TTL, want one create (already exists) and one describe; calls %v", api.calls)
	}
	out, err := motoEC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil || len(out.LaunchTemplates) != 1 {
		t.Errorf("want exactly one template in EC2, got %d (%v)", len(out.LaunchTemplates), err)
	}
}

func TestEnsureConcurrent(t *testing.T) {
	motoEC2 := reset(t)
	api := newCounting(motoEC2)
	p := New(api, "demo", nil, 0)
	var wg sync.WaitGroup
	var ids sync.Map
	var failed atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lt, err := p.Ensure(context.Background(), input())
			if err != nil {
				failed.Add(1)
				return
			}
			ids.Store(lt.ID, true)
		}()
	}
	wg.Wait()
	n := 0
	ids.Range(func(any, any) bool { n++; return true })
	if failed.Load() != 0 || n != 1 {
		t.Errorf("%d failures, %d distinct ids", failed.Load(), n)
	}
	if c := api.get("Create") + api.get("Describe"); c > 2 {
		t.Errorf("concurrent Ensures of one input should share the call; %v", api.calls)
	}
}

func TestEveryFieldNamesTheTemplate(t *testing.T) {
	motoEC2 := reset(t)
	p := New(motoEC2, "demo", nil, 0)
	base := aws.ToString(p.request(input()).LaunchTemplateName)
	size := resource.MustParse("100Gi")
	cases := map[string]func(*Input){
		"node class":       func(in *Input) { in.NodeClassName = "other" },
		"node class hash":  func(in *Input) { in.NodeClassHash = "5678" },
		"node pool":        func(in *Input) { in.NodePool = "other" },
		"capacity type":    func(in *Input) { in.CapacityType = "spot" },
		"AMI family":       func(in *Input) { in.AMIFamily = awsv1.AMIFamilyBottlerocket },
		"image":            func(in *Input) { in.ImageID = "ami-0fedcba9876543210" },
		"user data":        func(in *Input) { in.UserData = "IyEvYmluL3NoCg==" },
		"security groups":  func(in *Input) { in.SecurityGroupIDs = []string{"sg-1"} },
		"instance profile": func(in *Input) { in.InstanceProfile = "other" },
		"block devices": func(in *Input) {
			in.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: &size}}}
		},
		"metadata options":      func(in *Input) { in.MetadataOptions = &awsv1.MetadataOptions{HTTPPutResponseHopLimit: aws.Int64(2)} },
		"detailed monitoring":   func(in *Input) { in.DetailedMonitoring = true },
		"public IP":             func(in *Input) { in.AssociatePublicIPAddress = aws.Bool(false) },
		"IP prefixes":           func(in *Input) { in.IPPrefixCount = aws.Int32(1) },
		"tags":                  func(in *Input) { in.Tags = map[string]string{"team": "search"} },
		"placement group":       func(in *Input) { in.PlacementGroupID = "pg-0123456789abcdef0" },
		"placement partition":   func(in *Input) { in.PlacementGroupID, in.PlacementPartition = "pg-0123456789abcdef0", 2 },
		"connection tracking":   func(in *Input) { in.ConnectionTracking = &awsv1.ConnectionTracking{UDPTimeout: aws.Int32(60)} },
		"nested virtualization": func(in *Input) { in.NestedVirtualization = aws.String("enabled") },
		"dedicated tenancy":     func(in *Input) { in.Tenancy = "dedicated" },
		"capacity reservation":  func(in *Input) { in.CapacityReservationID = "cr-0123456789abcdef0" },
		"capacity block": func(in *Input) {
			in.CapacityReservationID, in.CapacityBlock = "cr-0123456789abcdef0", true
		},
	}
	seen := map[string]string{base: "base"}
	for field, change := range cases {
		in := input()
		change(&in)
		name := aws.ToString(p.request(in).LaunchTemplateName)
		if other, dup := seen[name]; dup {
			t.Errorf("changing %s gives the name of %s (%s)", field, other, name)
		}
		seen[name] = field
	}
	if other := aws.ToString(New(motoEC2, "other-cluster", nil, 0).request(input()).LaunchTemplateName); other == base {
		t.Error("another cluster's template has the same name")
	}
	if len(NamePrefix)+20 > 128 {
		t.Error("names may exceed EC2's 128 characters")
	}
}

func TestTemplateData(t *testing.T) {
	motoEC2 := reset(t)
	ctx := context.Background()
	p := New(motoEC2, "demo", nil, 0)
	size := resource.MustParse("100G")
	in := input()
	in.CapacityType = "spot"
	in.DetailedMonitoring = true
	in.AssociatePublicIPAddress = aws.Bool(true)
	in.MetadataOptions = &awsv1.MetadataOptions{HTTPPutResponseHopLimit: aws.Int64(2)}
	in.PlacementGroupID, in.PlacementPartition = "pg-0123456789abcdef0", 3
	in.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(3600), UDPStreamTimeout: aws.Int32(120), UDPTimeout: aws.Int32(60)}
	in.NestedVirtualization = aws.String("enabled")
	in.Tenancy = "dedicated"
	in.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{
		DeviceName: aws.String("/dev/xvda"),
		EBS: &awsv1.BlockDevice{
			VolumeSize: &size, VolumeType: aws.String("gp3"), IOPS: aws.Int64(4000), Throughput: aws.Int64(250),
			Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true), KMSKeyID: aws.String("arn:aws:kms:us-east-1:111122223333:key/abc"),
		},
	}}
	lt, d := ensureAndRead(t, p, motoEC2, in)
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	check("image", aws.ToString(d.ImageId), in.ImageID)
	check("user data", aws.ToString(d.UserData), in.UserData)
	check("instance profile", aws.ToString(d.IamInstanceProfile.Name), in.InstanceProfile)
	check("monitoring", aws.ToBool(d.Monitoring.Enabled), true)
	if d.Placement == nil {
		t.Fatal("no placement: the instance would launch outside the class's placement group")
	}
	check("placement group", aws.ToString(d.Placement.GroupId), in.PlacementGroupID)
	check("tenancy", d.Placement.Tenancy, ec2types.TenancyDedicated)
	check("partition", aws.ToInt32(d.Placement.PartitionNumber), int32(3))
	if len(d.BlockDeviceMappings) != 1 {
		t.Fatalf("block devices: %+v", d.BlockDeviceMappings)
	}
	bd := d.BlockDeviceMappings[0]
	check("device", aws.ToString(bd.DeviceName), "/dev/xvda")
	check("volume size (100G is 93.1Gi, rounded up)", aws.ToInt32(bd.Ebs.VolumeSize), int32(94))
	check("volume type", bd.Ebs.VolumeType, ec2types.VolumeTypeGp3)
	check("iops", aws.ToInt32(bd.Ebs.Iops), int32(4000))
	check("throughput", aws.ToInt32(bd.Ebs.Throughput), int32(250))
	check("encrypted", aws.ToBool(bd.Ebs.Encrypted), true)
	check("delete on termination", aws.ToBool(bd.Ebs.DeleteOnTermination), true)
	check("kms key", aws.ToString(bd.Ebs.KmsKeyId), "arn:aws:kms:us-east-1:111122223333:key/abc")
	m := d.MetadataOptions
	check("metadata endpoint", m.HttpEndpoint, ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled)
	check("metadata ipv6", m.HttpProtocolIpv6, ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled)
	check("metadata hop limit", aws.ToInt32(m.HttpPutResponseHopLimit), int32(2))
	check("metadata tokens", m.HttpTokens, ec2types.LaunchTemplateHttpTokensStateRequired)
	if len(d.NetworkInterfaces) != 1 {
		t.Fatalf("network interfaces: %+v", d.NetworkInterfaces)
	}
	ni := d.NetworkInterfaces[0]
	check("device index", aws.ToInt32(ni.DeviceIndex), int32(0))
	check("groups", ni.Groups, []string{"sg-1", "sg-2"})
	check("public IP", aws.ToBool(ni.AssociatePublicIpAddress), true)
	check("no top-level security groups beside the interface's", len(d.SecurityGroupIds), 0)
	if ct := ni.ConnectionTrackingSpecification; ct == nil {
		t.Error("no connection tracking on the primary interface")
	} else {
		check("conntrack timeouts", []int32{aws.ToInt32(ct.TcpEstablishedTimeout), aws.ToInt32(ct.UdpStreamTimeout), aws.ToInt32(ct.UdpTimeout)}, []int32{3600, 120, 60})
	}
	if d.CpuOptions == nil {
		t.Error("no CPU options")
	} else {
		check("nested virtualization", d.CpuOptions.NestedVirtualization, ec2types.NestedVirtualizationSpecificationEnabled)
	}

	wantTags := map[string]string{
		"team":                           "payments",
		"karpenter.k8s.aws/ec2nodeclass": "default",
		"karpenter.sh/nodepool":          "general",
		"kubernetes.io/cluster/demo":     "owned",
		"eks:eks-cluster-name":           "demo",
	}
	specs := map[ec2types.ResourceType]map[string]string{}
	for _, s := range d.TagSpecifications {
		specs[s.ResourceType] = tagMap(s.Tags)
	}
	check("network interface tags", specs[ec2types.ResourceTypeNetworkInterface], wantTags)
	check("spot request tags", specs[ec2types.ResourceTypeSpotInstancesRequest], wantTags)
	described, err := motoEC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{lt.ID}})
	if err != nil || len(described.LaunchTemplates) != 1 {
		t.Fatal(err)
	}
	check("template tags", tagMap(described.LaunchTemplates[0].Tags), wantTags)
}

func TestDefaults(t *testing.T) {
	motoEC2 := mototest.Clients(t, "").EC2
	p := New(motoEC2, "demo", nil, 0)
	cases := []struct {
		family string
		want   []string
	}{
		{awsv1.AMIFamilyAL2023, []string{"/dev/xvda 20 gp3 true"}},
		{awsv1.AMIFamilyBottlerocket, []string{"/dev/xvda 4 gp3 true", "/dev/xvdb 20 gp3 true"}},
		{awsv1.AMIFamilyWindows2022, []string{"/dev/sda1 50 gp3 true"}},
		{awsv1.AMIFamilyCustom, nil},
	}
	for _, tc := range cases {
		in := input()
		in.AMIFamily = tc.family
		d := p.request(in).LaunchTemplateData
		var got []string
		for _, m := range d.BlockDeviceMappings {
			got = append(got, fmt.Sprintf("%s %d %s %t", aws.ToString(m.DeviceName), aws.ToInt32(m.Ebs.VolumeSize), m.Ebs.VolumeType, aws.ToBool(m.Ebs.Encrypted)))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s block devices: got %v, want %v", tc.family, got, tc.want)
		}
		m := d.MetadataOptions
		if m.HttpEndpoint != "enabled" || m.HttpProtocolIpv6 != "disabled" || aws.ToInt32(m.HttpPutResponseHopLimit) != 1 || m.HttpTokens != "required" || m.InstanceMetadataTags != "disabled" {
			t.Errorf("default metadata options: %+v", m)
		}
		for _, s := range d.TagSpecifications {
			if s.ResourceType == ec2types.ResourceTypeSpotInstancesRequest {
				t.Error("an on-demand template tags no spot request")
			}
		}
	}
}

func TestDeleteForNodeClass(t *testing.T) {
	motoEC2 := reset(t)
	ctx := context.Background()
	api := newCounting(motoEC2)
	p := New(api, "demo", nil, 0)
	var mine []string
	for _, image := range []string{"ami-01", "ami-02"} {
		in := input()
		in.ImageID = image
		lt, err := p.Ensure(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, lt.ID)
	}
	other := input()
	other.NodeClassName = "other"
	kept, err := p.Ensure(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	otherCluster, err := New(motoEC2, "elsewhere", nil, 0).Ensure(ctx, input())
	if err != nil {
		t.Fatal(err)
	}

	if err := p.DeleteForNodeClass(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	left := templateIDs(t, motoEC2)
	want := []string{kept.ID, otherCluster.ID}
	sort.Strings(want)
	if !reflect.DeepEqual(left, want) {
		t.Errorf("left %v, want the other class's and the other cluster's %v (deleted %v)", left, want, mine)
	}
	// Deleting again finds nothing and is no error.
	if err := p.DeleteForNodeClass(ctx, "default"); err != nil {
		t.Errorf("second delete: %v", err)
	}
	// The provider forgot the deleted templates: Ensure creates anew.
	creates := api.get("Create")
	again, err := p.Ensure(ctx, input())
	if err != nil || api.get("Create") != creates+1 || again.ID == mine[0] {
		t.Errorf("after delete, Ensure gave %+v, %v, creates %d->%d", again, err, creates, api.get("Create"))
	}
}

func TestEnsureRejectsIncompleteInput(t *testing.T) {
	motoEC2 := mototest.Clients(t, "").EC2
	p := New(motoEC2, "demo", nil, 0)
	cases := map[string]func(*Input){
		"no AMI to launch; status.amis is empty":               func(in *Input) { in.ImageID = "" },
		"no security groups; status.securityGroups is empty":   func(in *Input) { in.SecurityGroupIDs = nil },
		"no instance profile; status.instanceProfile is empty": func(in *Input) { in.InstanceProfile = "" },
		"a launch template needs its EC2NodeClass name":        func(in *Input) { in.NodeClassName = "" },
	}
	for want, change := range cases {
		in := input()
		change(&in)
		if _, err := p.Ensure(context.Background(), in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
	if _, err := New(motoEC2, "", nil, 0).Ensure(context.Background(), input()); err == nil || !strings.Contains(err.Error(), "CLUSTER_NAME") {
		t.Errorf("no cluster name: %v", err)
	}
}

func tagMap(tags []ec2types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

// Sweep deletes the cluster's templates that are older than the TTL and
// that no launch used within it; a template in use, a young one (another
// process may have just made it) and another cluster's stay.
func TestSweepDeletesUnusedTemplates(t *testing.T) {
	motoEC2 := reset(t)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	p := New(motoEC2, "demo", clk, time.Minute)
	used, err := p.Ensure(ctx, input())
	if err != nil {
		t.Fatal(err)
	}
	idle := input()
	idle.ImageID = "ami-0idle"
	unused, err := p.Ensure(ctx, idle)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := New(motoEC2, "elsewhere", clk, time.Minute).Ensure(ctx, input())
	if err != nil {
		t.Fatal(err)
	}
	// Young: nothing goes, although a restarted process knows none of them.
	if n, err := New(motoEC2, "demo", clk, time.Minute).Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweeping young templates deleted %d (%v), want 0", n, err)
	}
	// Two TTLs on, the first template was used a moment ago.
	clk.Step(90 * time.Second)
	if _, err := p.Ensure(ctx, input()); err != nil {
		t.Fatal(err)
	}
	clk.Step(40 * time.Second)
	if _, err := p.Ensure(ctx, input()); err != nil {
		t.Fatal(err)
	}
	n, err := p.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep deleted %d (%v), want 1", n, err)
	}
	left := templateIDs(t, motoEC2)
	want := []string{used.ID, elsewhere.ID}
	sort.Strings(want)
	if !reflect.DeepEqual(left, want) {
		t.Errorf("left %v, want the used one and the other cluster's %v (unused was %s)", left, want, unused.ID)
	}
}

// templateIDs are the IDs of every template in EC2, sorted.
func templateIDs(t *testing.T, api EC2API) []string {
	t.Helper()
	out, err := api.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, lt := range out.LaunchTemplates {
		ids = append(ids, aws.ToString(lt.LaunchTemplateId))
	}
	sort.Strings(ids)
	return ids
}

// TestNetworkInterfaces: the class's interfaces as listed, EFA on every
// card for a NodeClaim that asked for it, else the primary alone; IP
// settings only where IP traffic flows.
func TestNetworkInterfaces(t *testing.T) {
	type iface struct {
		card, device int32
		kind         string
		publicIP     bool
		conntrack    bool
	}
	base := func() Input {
		in := input()
		in.AssociatePublicIPAddress = aws.Bool(false)
		in.ConnectionTracking = &awsv1.ConnectionTracking{UDPTimeout: aws.Int32(60)}
		return in
	}
	tests := []struct {
		name string
		edit func(*Input)
		want []iface
	}{
		{name: "the primary alone", edit: func(*Input) {}, want: []iface{{0, 0, "", true, true}}},
		{name: "the class's interfaces", edit: func(in *Input) {
			in.NetworkInterfaces = []awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"}, {NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "efa-only"}}
		}, want: []iface{{0, 0, "", true, true}, {1, 0, "efa-only", false, false}}},
		{name: "EFA on every card", edit: func(in *Input) { in.EFAInterfaces = 3 },
			want: []iface{{0, 0, "efa", true, true}, {1, 1, "efa", true, true}, {2, 1, "efa", true, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.edit(&in)
			got := networkInterfaces(in)
			if len(got) != len(tt.want) {
				t.Fatalf("%d interfaces, want %d: %+v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if aws.ToInt32(g.NetworkCardIndex) != w.card || aws.ToInt32(g.DeviceIndex) != w.device || aws.ToString(g.InterfaceType) != w.kind ||
					(g.AssociatePublicIpAddress != nil) != w.publicIP || (g.ConnectionTrackingSpecification != nil) != w.conntrack {
					t.Errorf("interface %d: card %d device %d type %q public IP %v conntrack %v; want %+v", i, aws.ToInt32(g.NetworkCardIndex), aws.ToInt32(g.DeviceIndex),
						aws.ToString(g.InterfaceType), g.AssociatePublicIpAddress != nil, g.ConnectionTrackingSpecification != nil, w)
				}
				if len(g.Groups) != 2 {
					t.Errorf("interface %d has groups %v, want the class's two", i, g.Groups)
				}
			}
		})
	}
}

// TestReservationTarget: a template for a reservation targets it by id,
// and a Capacity Block's also asks for its market.
func TestReservationTarget(t *testing.T) {
	p := New(nil, "demo", nil, 0)
	for _, tt := range []struct {
		name   string
		id     string
		block  bool
		market ec2types.MarketType
	}{
		{name: "none"},
		{name: "a reservation", id: "cr-1"},
		{name: "a capacity block", id: "cr-2", block: true, market: ec2types.MarketTypeCapacityBlock},
	} {
		in := input()
		in.CapacityReservationID, in.CapacityBlock = tt.id, tt.block
		d := p.request(in).LaunchTemplateData
		var target string
		if d.CapacityReservationSpecification != nil && d.CapacityReservationSpecification.CapacityReservationTarget != nil {
			target = aws.ToString(d.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId)
		}
		var market ec2types.MarketType
		if d.InstanceMarketOptions != nil {
			market = d.InstanceMarketOptions.MarketType
		}
		if target != tt.id || market != tt.market {
			t.Errorf("%s: target %q market %q; want %q %q", tt.name, target, market, tt.id, tt.market)
		}
	}
}

// TestIPv6Interfaces: in an IPv6 cluster the primary interface gets a
// primary IPv6 address and the class's prefixes are IPv6 prefixes.
func TestIPv6Interfaces(t *testing.T) {
	in := input()
	in.IPv6, in.IPPrefixCount = true, aws.Int32(1)
	ni := networkInterfaces(in)[0]
	if aws.ToInt32(ni.Ipv6AddressCount) != 1 || !aws.ToBool(ni.PrimaryIpv6) || aws.ToInt32(ni.Ipv6PrefixCount) != 1 || ni.Ipv4PrefixCount != nil {
		t.Fatalf("IPv6 primary interface %+v", ni)
	}
	in.IPv6 = false
	ni = networkInterfaces(in)[0]
	if ni.Ipv6AddressCount != nil || ni.PrimaryIpv6 != nil || aws.ToInt32(ni.Ipv4PrefixCount) != 1 {
		t.Fatalf("IPv4 primary interface %+v", ni)
	}
}
