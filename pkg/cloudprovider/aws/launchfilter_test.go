package aws

import (
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func names(its []*cloudprovider.InstanceType) string {
	var out []string
	for _, it := range its {
		out = append(out, it.Name)
	}
	return strings.Join(out, ",")
}

func labelled(it *cloudprovider.InstanceType, kv ...string) *cloudprovider.InstanceType {
	for i := 0; i+1 < len(kv); i += 2 {
		it.Labels[kv[i]] = kv[i+1]
	}
	return it
}

func TestWithoutExotic(t *testing.T) {
	m5 := func() *cloudprovider.InstanceType { return itype("m5.large", "amd64", 2, 29) }
	g5 := func() *cloudprovider.InstanceType {
		return labelled(itype("g5.xlarge", "amd64", 4, 58), "karpenter.k8s.aws/instance-gpu-count", "1")
	}
	inf := func() *cloudprovider.InstanceType {
		return labelled(itype("inf2.xlarge", "amd64", 4, 58), "karpenter.k8s.aws/instance-accelerator-count", "1")
	}
	metal := func() *cloudprovider.InstanceType {
		return labelled(itype("m5.metal", "amd64", 96, 737), "karpenter.k8s.aws/instance-size", "metal")
	}
	none := labelled(itype("m6i.large", "amd64", 2, 29), "karpenter.k8s.aws/instance-gpu-count", "0")
	cases := []struct {
		name string
		its  []*cloudprovider.InstanceType
		reqs []v1.NodeSelectorRequirementWithMinValues
		want string
	}{
		{name: "GPU, accelerator and metal types go when a plain type fits", its: []*cloudprovider.InstanceType{g5(), m5(), inf(), metal()}, want: "m5.large"},
		{name: "a gpu-count of 0 is plain", its: []*cloudprovider.InstanceType{none, g5()}, want: "m6i.large"},
		{name: "only exotic types fit (the pod asks for a GPU): all stay", its: []*cloudprovider.InstanceType{g5(), inf()}, want: "g5.xlarge,inf2.xlarge"},
		{name: "minValues needs every type", its: []*cloudprovider.InstanceType{g5(), m5()},
			reqs: []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists, MinValues: ptr.To(2)}},
			want: "g5.xlarge,m5.large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim := &v1.NodeClaim{Spec: v1.NodeClaimSpec{Requirements: tc.reqs}}
			if got := names(withoutExotic(tc.its, claim)); got != tc.want {
				t.Errorf("kept %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWithoutDearSpot(t *testing.T) {
	// m5.large: spot 0.04, on-demand 0.096; c5.xlarge: spot 0.11 (dearer
	// than m5.large on demand), on-demand 0.17; r5.large: spot only in
	// zone b, 0.05.
	its := func() []*cloudprovider.InstanceType {
		return []*cloudprovider.InstanceType{
			itype("m5.large", "amd64", 2, 29, offering(zoneA, spot, 0.04), offering(zoneA, onDemand, 0.096)),
			itype("c5.xlarge", "amd64", 4, 58, offering(zoneA, spot, 0.11), offering(zoneA, onDemand, 0.17)),
			itype("r5.large", "amd64", 2, 29, offering(zoneB, spot, 0.05), unavailableOffering(zoneB, onDemand, 0.03)),
		}
	}
	cases := []struct {
		name string
		reqs []v1.NodeSelectorRequirementWithMinValues
		want string
	}{
		{name: "spot dearer than the cheapest on-demand goes",
			reqs: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{spot, onDemand}}},
			want: "m5.large,r5.large"},
		{name: "spot only: nothing to compare with, all stay",
			reqs: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{spot}}},
			want: "m5.large,c5.xlarge,r5.large"},
		{name: "the on-demand compared with is in an allowed zone",
			reqs: []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zoneB}}},
			want: "m5.large,c5.xlarge,r5.large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := requirements.FromNodeSelectorRequirements(tc.reqs...)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(withoutDearSpot(its(), reqs)); got != tc.want {
				t.Errorf("kept %q, want %q", got, tc.want)
			}
		})
	}
}

// Create applies both rules: the GPU type, cheapest on spot, and the
// c5.xlarge, whose spot price is above m5.large's on-demand price, are not
// offered to the fleet.
func TestCreateLeavesOutExoticAndDearSpot(t *testing.T) {
	catalog := []*cloudprovider.InstanceType{
		itype("m5.large", "amd64", 2, 29, offering(zoneA, spot, 0.04), offering(zoneA, onDemand, 0.096)),
		itype("c5.xlarge", "amd64", 4, 58, offering(zoneA, spot, 0.11), offering(zoneA, onDemand, 0.17)),
		labelled(itype("g5.xlarge", "amd64", 4, 58, offering(zoneA, spot, 0.03), offering(zoneA, onDemand, 0.5)), "karpenter.k8s.aws/instance-gpu-count", "1"),
	}
	nc := readyClass()
	f := &fakes{instanceTypes: &fakeInstanceTypes{types: catalog}, instances: &fakeInstances{notFoundGets: 1 << 30}}
	p := newProvider(t, kubeWith(t, nc), f)
	if _, _, err := createStepping(t, p, f, nodeClaim()); err != nil {
		t.Fatal(err)
	}
	if len(f.instances.requests) != 1 {
		t.Fatalf("%d launch requests, want 1", len(f.instances.requests))
	}
	var got []string
	for _, o := range f.instances.requests[0].Overrides {
		got = append(got, o.InstanceType)
	}
	if strings.Join(got, ",") != "m5.large" {
		t.Errorf("the fleet was offered %v, want [m5.large]", got)
	}
}

// A launch that finds one of its launch templates gone (deleted by hand)
// makes the cache forget the launch's templates, so the next try creates
// them, whether EC2 said so in the fleet's errors or as the call's error.
func TestCreateForgetsGoneLaunchTemplates(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"in the fleet's errors", &instance.LaunchTemplateNotFoundError{Message: "InvalidLaunchTemplateId.NotFound: gone"}},
		{"as the call's error", &smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.NotFoundException", Message: "gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{createErr: tc.err}}
			p := newProvider(t, kubeWith(t, readyClass()), f)
			if _, _, err := createStepping(t, p, f, nodeClaim()); err == nil || cloudprovider.IsInsufficientCapacity(err) {
				t.Fatalf("Create: %v; want an error that is not a capacity error", err)
			}
			if got := strings.Join(f.templates.forgotten, ","); got != "lt-m5.large,lt-m5.xlarge,lt-m6g.large" {
				t.Errorf("forgot %q, want the launch's three templates", got)
			}
		})
	}
}

// Each dear spot offering goes, not the type: its cheap zone stays; and a
// NodeClaim with minValues keeps every type, as Karpenter's filter does.
func TestWithoutDearSpotPerOffering(t *testing.T) {
	its := []*cloudprovider.InstanceType{
		itype("m5.large", "amd64", 2, 29, offering(zoneA, spot, 0.04), offering(zoneB, spot, 0.12), offering(zoneA, onDemand, 0.096)),
		itype("c5.xlarge", "amd64", 4, 58, offering(zoneA, spot, 0.11), offering(zoneA, onDemand, 0.17)),
	}
	both := v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{spot, onDemand}}
	reqs, err := requirements.FromNodeSelectorRequirements(both)
	if err != nil {
		t.Fatal(err)
	}
	got := withoutDearSpot(its, reqs)
	if names(got) != "m5.large" {
		t.Fatalf("kept %q, want m5.large", names(got))
	}
	var spotZones []string
	for _, o := range got[0].Offerings {
		if o.CapacityType == spot {
			spotZones = append(spotZones, o.Zone)
		}
	}
	if len(spotZones) != 1 || spotZones[0] != zoneA {
		t.Errorf("m5.large's spot offerings in %v, want %s alone (zone b's is dearer than on-demand)", spotZones, zoneA)
	}
	if len(its[0].Offerings) != 3 {
		t.Error("the shared type's offerings were changed")
	}
	two := 2
	withMin, err := requirements.FromNodeSelectorRequirements(both, v1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists, MinValues: &two})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(withoutDearSpot(its, withMin)); got != "m5.large,c5.xlarge" {
		t.Errorf("with minValues kept %q, want both types", got)
	}
}
