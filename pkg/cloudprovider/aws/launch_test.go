package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/amifamily"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instancetype"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/launchtemplate"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var testCluster = Cluster{Name: "demo", Endpoint: "https://demo.example", CABundle: base64.StdEncoding.EncodeToString([]byte("ca")),
	ServiceCIDR: "10.100.0.0/16", DNS: []string{"10.100.0.10"}}

var (
	dedicated      = corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	agentNotReady  = corev1.Taint{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}
	onlyAMD64AMI   = func(nc *awsv1.EC2NodeClass) { nc.Status.AMIs = nc.Status.AMIs[:1] }
	withKubeletMem = func(nc *awsv1.EC2NodeClass) {
		nc.Spec.Kubelet = &awsv1.KubeletConfiguration{KubeReserved: map[string]string{"memory": "1Gi"}}
	}
)

// withReserved is it with another kube-reserved memory.
func withReserved(it *cloudprovider.InstanceType, memory string) *cloudprovider.InstanceType {
	it.KubeReserved = it.KubeReserved.DeepCopy()
	it.KubeReserved[corev1.ResourceMemory] = resource.MustParse(memory)
	return it
}

func TestForLaunch(t *testing.T) {
	// group is one expected template: its AMI, and the max pods and
	// kube-reserved its user data states.
	type group struct {
		ami          string
		maxPods      int32
		kubeReserved map[string]string
	}
	cases := []struct {
		name   string
		class  *awsv1.EC2NodeClass
		types  []*cloudprovider.InstanceType
		groups []group
		want   map[string]string // type -> template
	}{{
		name:  "one template per (AMI, max pods, kube-reserved)",
		class: readyClass(),
		types: []*cloudprovider.InstanceType{itype("m5.large", "amd64", 2, 29), itype("m5.xlarge", "amd64", 4, 58), itype("c5.large", "amd64", 2, 29), itype("m6g.large", "arm64", 2, 29)},
		groups: []group{
			{amiAMD, 29, map[string]string{"cpu": "80m", "memory": "574Mi"}},
			{amiAMD, 58, map[string]string{"cpu": "100m", "memory": "893Mi"}},
			{amiARM, 29, map[string]string{"cpu": "80m", "memory": "574Mi"}},
		},
		want: map[string]string{"m5.large": "lt-1", "c5.large": "lt-1", "m5.xlarge": "lt-2", "m6g.large": "lt-3"},
	}, {
		name:   "same AMI and max pods, other kube-reserved: two templates",
		class:  readyClass(),
		types:  []*cloudprovider.InstanceType{itype("m5.large", "amd64", 2, 29), withReserved(itype("c5.large", "amd64", 2, 29), "600Mi")},
		groups: []group{{amiAMD, 29, map[string]string{"cpu": "80m", "memory": "574Mi"}}, {amiAMD, 29, map[string]string{"cpu": "80m", "memory": "600Mi"}}},
		want:   map[string]string{"m5.large": "lt-1", "c5.large": "lt-2"},
	}, {
		name:   "same AMI and kube-reserved, other max pods: two templates",
		class:  readyClass(),
		types:  []*cloudprovider.InstanceType{itype("m5.large", "amd64", 2, 29), withReserved(itype("c5.large", "amd64", 2, 110), "574Mi")},
		groups: []group{{amiAMD, 29, map[string]string{"cpu": "80m", "memory": "574Mi"}}, {amiAMD, 110, map[string]string{"cpu": "80m", "memory": "574Mi"}}},
		want:   map[string]string{"m5.large": "lt-1", "c5.large": "lt-2"},
	}, {
		name:   "an arm64 type with only an amd64 AMI is left out",
		class:  readyClass(onlyAMD64AMI),
		types:  []*cloudprovider.InstanceType{itype("m6g.large", "arm64", 2, 29), itype("m5.large", "amd64", 2, 29)},
		groups: []group{{amiAMD, 29, map[string]string{"cpu": "80m", "memory": "574Mi"}}},
		want:   map[string]string{"m5.large": "lt-1"},
	}, {
		name:   "the class's kubeReserved wins over the type's",
		class:  readyClass(withKubeletMem),
		types:  []*cloudprovider.InstanceType{itype("m5.large", "amd64", 2, 29)},
		groups: []group{{amiAMD, 29, map[string]string{"cpu": "80m", "memory": "1Gi"}}},
		want:   map[string]string{"m5.large": "lt-1"},
	}, {
		name:  "no AMI fits: no template",
		class: readyClass(onlyAMD64AMI),
		types: []*cloudprovider.InstanceType{itype("m6g.large", "arm64", 2, 29)},
		want:  map[string]string{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ensurer := &fakeEnsurer{}
			l := &Launcher{Templates: ensurer, Cluster: testCluster}
			claim := nodeClaim()
			claim.Spec.Taints = []corev1.Taint{dedicated}
			claim.Spec.StartupTaints = []corev1.Taint{agentNotReady}
			got, err := l.ForLaunch(context.Background(), tc.class, claim, tc.types, spot)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("templates %v, want %v", got, tc.want)
			}
			if len(ensurer.inputs) != len(tc.groups) {
				t.Fatalf("%d templates ensured, want %d", len(ensurer.inputs), len(tc.groups))
			}
			for i, g := range tc.groups {
				kubelet := &awsv1.KubeletConfiguration{KubeReserved: g.kubeReserved}
				userData, err := amifamily.UserData(awsv1.AMIFamilyAL2023, amifamily.Input{
					ClusterName: "demo", ClusterEndpoint: "https://demo.example", CABundle: testCluster.CABundle,
					ClusterCIDR: "10.100.0.0/16", ClusterDNS: []string{"10.100.0.10"},
					Labels: claim.Labels, Taints: []corev1.Taint{dedicated, v1.UnregisteredNoExecuteTaint}, StartupTaints: []corev1.Taint{agentNotReady},
					Kubelet: kubelet, MaxPods: g.maxPods,
				})
				if err != nil {
					t.Fatal(err)
				}
				want := launchtemplate.Input{
					NodeClassName: "default", NodeClassHash: tc.class.Hash(), NodePool: "default", CapacityType: spot,
					AMIFamily: awsv1.AMIFamilyAL2023, ImageID: g.ami, UserData: userData, SecurityGroupIDs: []string{"sg-1", "sg-2"},
					InstanceProfile: "demo_1234", Tags: map[string]string{"team": "payments"}, Tenancy: "default",
				}
				if in := ensurer.inputs[i]; !reflect.DeepEqual(in, want) {
					t.Errorf("template %d\n got %+v\nwant %+v\nuser data got:\n%s\nwant:\n%s", i+1, in, want, decode(in.UserData), decode(want.UserData))
				}
			}
		})
	}
}

func decode(s string) string {
	b, _ := base64.StdEncoding.DecodeString(s)
	return string(b)
}

// The user data's input: the NodeClaim's labels, its taints plus
// karpenter.sh/unregistered, its startup taints, and the type's
// kube-reserved under the class's kubelet.kubeReserved; the class's
// instanceStorePolicy RAID0.
func TestUserDataInput(t *testing.T) {
	typeReserved := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("80m"), corev1.ResourceMemory: resource.MustParse("574Mi")}
	maxPods := int32(110)
	cases := []struct {
		name          string
		kubelet       *awsv1.KubeletConfiguration
		taints        []corev1.Taint
		startupTaints []corev1.Taint
		typeReserved  corev1.ResourceList
		raid0         bool
		wantTaints    []corev1.Taint
		wantKubelet   *awsv1.KubeletConfiguration
	}{{
		name:         "no taints of its own: only unregistered; the type's kube-reserved",
		typeReserved: typeReserved,
		wantTaints:   []corev1.Taint{v1.UnregisteredNoExecuteTaint},
		wantKubelet:  &awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "80m", "memory": "574Mi"}},
	}, {
		name:          "the NodeClaim's taints then unregistered, startup taints apart",
		taints:        []corev1.Taint{dedicated},
		startupTaints: []corev1.Taint{agentNotReady},
		wantTaints:    []corev1.Taint{dedicated, v1.UnregisteredNoExecuteTaint},
		wantKubelet:   &awsv1.KubeletConfiguration{},
	}, {
		name:         "the class's kubeReserved wins, entry by entry; the rest of its kubelet stays",
		kubelet:      &awsv1.KubeletConfiguration{MaxPods: &maxPods, KubeReserved: map[string]string{"memory": "1Gi", "pid": "100"}},
		typeReserved: typeReserved,
		wantTaints:   []corev1.Taint{v1.UnregisteredNoExecuteTaint},
		wantKubelet:  &awsv1.KubeletConfiguration{MaxPods: &maxPods, KubeReserved: map[string]string{"cpu": "80m", "memory": "1Gi", "pid": "100"}},
	}, {
		name:        "the class's kubeReserved alone",
		kubelet:     &awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "1"}},
		wantTaints:  []corev1.Taint{v1.UnregisteredNoExecuteTaint},
		wantKubelet: &awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "1"}},
	}, {
		name:        "instanceStorePolicy RAID0: the user data builds the array",
		raid0:       true,
		wantTaints:  []corev1.Taint{v1.UnregisteredNoExecuteTaint},
		wantKubelet: &awsv1.KubeletConfiguration{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := readyClass(func(nc *awsv1.EC2NodeClass) {
				nc.Spec.Kubelet = tc.kubelet
				if tc.raid0 {
					policy := awsv1.InstanceStorePolicyRAID0
					nc.Spec.InstanceStorePolicy = &policy
				}
			})
			before := nc.DeepCopy()
			claim := nodeClaim()
			claim.Spec.Taints, claim.Spec.StartupTaints = tc.taints, tc.startupTaints
			l := &Launcher{Cluster: testCluster}
			got := l.input(nc, claim, 29, tc.typeReserved)
			want := amifamily.Input{
				ClusterName: "demo", ClusterEndpoint: "https://demo.example", CABundle: testCluster.CABundle,
				ClusterCIDR: "10.100.0.0/16", ClusterDNS: []string{"10.100.0.10"},
				Labels: map[string]string{v1.LabelNodePool: "default", "team": "payments"}, Taints: tc.wantTaints, StartupTaints: tc.startupTaints,
				Kubelet: tc.wantKubelet, MaxPods: 29, InstanceStoreRAID0: tc.raid0,
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("input\n got %+v (kubelet %+v)\nwant %+v (kubelet %+v)", got, got.Kubelet, want, want.Kubelet)
			}
			if !reflect.DeepEqual(nc, before) {
				t.Error("the class was changed")
			}
			if len(claim.Spec.Taints) != len(tc.taints) {
				t.Error("the NodeClaim's taints were changed")
			}
		})
	}
}

// TestForLaunchEFA: a NodeClaim that requests EFA gets templates with every
// EFA interface of each type, grouped by that count; one that does not,
// and a class that lists its own interfaces, get none added.
func TestForLaunchEFA(t *testing.T) {
	withEFA := func(it *cloudprovider.InstanceType, n int64) *cloudprovider.InstanceType {
		it.Capacity[instancetype.ResourceEFA] = *resource.NewQuantity(n, resource.DecimalSI)
		return it
	}
	types := func() []*cloudprovider.InstanceType {
		return []*cloudprovider.InstanceType{withEFA(itype("p5.48xlarge", "amd64", 192, 100), 32), withEFA(itype("c6in.32xlarge", "amd64", 128, 100), 2)}
	}
	listed := readyClass(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.NetworkInterfaces = []awsv1.NetworkInterface{{InterfaceType: "interface"}}
	})
	for _, tt := range []struct {
		name    string
		class   *awsv1.EC2NodeClass
		request bool
		want    map[int32]bool
	}{
		{name: "requested", class: readyClass(), request: true, want: map[int32]bool{32: true, 2: true}},
		{name: "not requested", class: readyClass(), want: map[int32]bool{0: true}},
		{name: "the class lists its interfaces", class: listed, request: true, want: map[int32]bool{0: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ensurer := &fakeEnsurer{}
			l := &Launcher{Templates: ensurer, Cluster: testCluster}
			claim := nodeClaim()
			if tt.request {
				claim.Spec.Resources.Requests = corev1.ResourceList{instancetype.ResourceEFA: resource.MustParse("1")}
			}
			if _, err := l.ForLaunch(context.Background(), tt.class, claim, types(), spot); err != nil {
				t.Fatal(err)
			}
			got := map[int32]bool{}
			for _, in := range ensurer.inputs {
				got[in.EFAInterfaces] = true
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("EFA interface counts %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClusterIPv6(t *testing.T) {
	for _, tt := range []struct {
		c    Cluster
		want bool
	}{
		{Cluster{ServiceCIDR: "10.100.0.0/16"}, false},
		{Cluster{ServiceCIDR: "fd30:1c53:5f8a::/108"}, true},
		{Cluster{DNS: []string{"fd30:1c53:5f8a::a"}}, true},
		{Cluster{DNS: []string{"10.100.0.10"}}, false},
		{Cluster{}, false},
	} {
		if got := tt.c.IPv6(); got != tt.want {
			t.Errorf("%+v: IPv6 %v, want %v", tt.c, got, tt.want)
		}
	}
}

func TestRequiredPartition(t *testing.T) {
	for _, tt := range []struct {
		reqs []v1.NodeSelectorRequirementWithMinValues
		want int32
	}{
		{nil, 0},
		{[]v1.NodeSelectorRequirementWithMinValues{{Key: placementgroup.LabelPartition, Operator: corev1.NodeSelectorOpIn, Values: []string{"2"}}}, 2},
		{[]v1.NodeSelectorRequirementWithMinValues{{Key: placementgroup.LabelPartition, Operator: corev1.NodeSelectorOpIn, Values: []string{"1", "2"}}}, 0},
		{[]v1.NodeSelectorRequirementWithMinValues{{Key: placementgroup.LabelPartition, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"2"}}}, 0},
	} {
		if got := requiredPartition(nodeClaim(tt.reqs...)); got != tt.want {
			t.Errorf("%v: partition %d, want %d", tt.reqs, got, tt.want)
		}
	}
}

// TestCreateResumesAnUnrecordedLaunch: a NodeClaim that attempted its
// launch before (v1.AnnotationLaunchAttempted) adopts the instance that
// attempt started instead of launching a second one; a first attempt does
// not even ask.
func TestCreateResumesAnUnrecordedLaunch(t *testing.T) {
	const attempted = "2025-01-01T00:00:00Z"
	earlier := &instance.Instance{ID: "i-0earlier000000000", Type: "m5.large", Zone: zoneA, CapacityType: onDemand, SubnetID: "subnet-a", State: "running",
		ImageID: "ami-0earlier", PrivateDNS: "ip-10-0-1-5.ec2.internal"}
	for _, tc := range []struct {
		name       string
		annotation string
		earlier    *instance.Instance
		reqs       []v1.NodeSelectorRequirementWithMinValues
		// recordedByAnother: another NodeClaim's status names the instance.
		recordedByAnother bool
		wantAsked         bool
		wantLaunch        bool
		wantID            string
		wantErrPart       string
	}{
		{name: "first attempt: launches without asking", wantLaunch: true, wantID: "i-0123456789abcdef0"},
		{name: "an earlier attempt's instance is adopted", annotation: attempted, earlier: earlier, wantAsked: true, wantID: earlier.ID},
		{name: "an earlier attempt left nothing: launches", annotation: attempted, wantAsked: true, wantLaunch: true, wantID: "i-0123456789abcdef0"},
		{name: "an instance the NodeClaim could not run as is not adopted", annotation: attempted, earlier: earlier,
			reqs:      []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge")},
			wantAsked: true, wantLaunch: true, wantID: "i-0123456789abcdef0"},
		{name: "an instance another NodeClaim recorded is not adopted", annotation: attempted, earlier: earlier, recordedByAnother: true,
			wantAsked: true, wantLaunch: true, wantID: "i-0123456789abcdef0"},
		{name: "a malformed annotation names itself", annotation: "yesterday", wantErrPart: "joiner.sh/launch-attempted=\"yesterday\" is not an RFC 3339 time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()},
				instances: &fakeInstances{earlier: tc.earlier, described: map[string]*instance.Instance{earlier.ID: earlier}}}
			objs := []client.Object{readyClass()}
			if tc.recordedByAnother {
				other := nodeClaim()
				other.Name, other.Status.ProviderID = "default-other", earlier.ProviderID()
				objs = append(objs, other)
			}
			p := newProvider(t, kubeWith(t, objs...), f)
			claim := nodeClaim(tc.reqs...)
			if tc.annotation != "" {
				claim.Annotations = map[string]string{v1.AnnotationLaunchAttempted: tc.annotation}
			}
			out, _, err := createStepping(t, p, f, claim)
			if tc.wantErrPart != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrPart) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErrPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if asked := len(f.instances.resumes) > 0; asked != tc.wantAsked {
				t.Errorf("asked for an earlier attempt's instance %t (%v), want %t", asked, f.instances.resumes, tc.wantAsked)
			}
			if launched := len(f.instances.requests) > 0; launched != tc.wantLaunch {
				t.Errorf("launched %t, want %t", launched, tc.wantLaunch)
			}
			if id, _ := instance.ParseProviderID(out.Status.ProviderID); id != tc.wantID {
				t.Errorf("provider ID %s, want instance %s", out.Status.ProviderID, tc.wantID)
			}
		})
	}
}

// The class's validation reports the user data's size before any template
// is made, an oversized one too, as Karpenter's dry run does: a user sees
// the series, and the warning near 16 KB, before a launch fails.
func TestUserDataBytesBeforeALaunch(t *testing.T) {
	cases := []struct {
		name     string
		userData string
		wantErr  bool
		atLeast  float64
	}{
		{name: "within the limit", userData: "#!/bin/bash\necho hello\n", atLeast: 100},
		{name: "oversized", userData: "#!/bin/bash\n" + strings.Repeat("# padding\n", 1700), wantErr: true, atLeast: amifamily.MaxUserData + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "validated-" + strings.ReplaceAll(tc.name, " ", "-")
			t.Cleanup(func() { metrics.EC2NodeClassUserDataBytes.DeleteLabelValues(name) })
			nc := readyClass(func(nc *awsv1.EC2NodeClass) { nc.Name, nc.Spec.UserData = name, &tc.userData })
			// No Templates: nothing can be made, so the size comes from the
			// validation alone.
			err := (&Launcher{Cluster: testCluster}).ValidateUserData(context.Background(), nc)
			var tooLarge *amifamily.TooLargeError
			if errors.As(err, &tooLarge) != tc.wantErr {
				t.Fatalf("error %v, want too large %v", err, tc.wantErr)
			}
			if got := testutil.ToFloat64(metrics.EC2NodeClassUserDataBytes.WithLabelValues(name)); got < tc.atLeast {
				t.Errorf("karpenter_ec2nodeclasses_userdata_bytes %v, want at least %v", got, tc.atLeast)
			}
		})
	}
}
