package cloudprovider

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestInstanceTypeCopy: Copy keeps every exported field (a field added to
// InstanceType and left out of Copy fails here), and the copy's
// LabelRequirements follow its own labels, not the cache of the type it
// was copied from.
func TestInstanceTypeCopy(t *testing.T) {
	it := &InstanceType{Name: "m5.large", Labels: map[string]string{"karpenter.k8s.aws/instance-family": "m5"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m")},
		Offerings:    []Offering{{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096, Available: true}},
		AttachLimits: map[string]int{"ebs.csi.aws.com": 25}, KubeReserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("70m")},
		PriceOverlaid: true, CapacityOverlaid: true}
	v := reflect.ValueOf(it).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && v.Field(i).IsZero() {
			t.Fatalf("the test leaves InstanceType.%s zero: give it a value", f.Name)
		}
	}
	_ = it.LabelRequirements()
	cp := it.Copy()
	c := reflect.ValueOf(cp).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && !reflect.DeepEqual(v.Field(i).Interface(), c.Field(i).Interface()) {
			t.Errorf("Copy loses %s", f.Name)
		}
	}
	cp.Labels = map[string]string{"karpenter.k8s.aws/instance-family": "m6i"}
	if !cp.LabelRequirements().Allows("karpenter.k8s.aws/instance-family", "m6i") || cp.LabelRequirements().Allows("karpenter.k8s.aws/instance-family", "m5") {
		t.Errorf("the copy's requirements are %s; want its own labels", cp.LabelRequirements())
	}
}

// TestInstanceTypeWithOfferings: the copy has the new offerings, the
// original keeps its own, and both share one set of label requirements
// (the planner's copies must not work them out again).
func TestInstanceTypeWithOfferings(t *testing.T) {
	it := &InstanceType{Name: "m5.large", Labels: map[string]string{"karpenter.k8s.aws/instance-family": "m5"},
		Offerings: []Offering{{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096, Available: true}}}
	room := []Offering{{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0, Available: true, Room: Room{ID: "ri-1", Left: 8, Takes: 1}}}
	cp := it.WithOfferings(room)
	if !reflect.DeepEqual(cp.Offerings, room) || len(it.Offerings) != 1 || it.Offerings[0].Limited() {
		t.Fatalf("copy's offerings %v, original's %v", cp.Offerings, it.Offerings)
	}
	if cp.Name != it.Name || !reflect.DeepEqual(cp.Labels, it.Labels) {
		t.Errorf("copy %s %v, want the original's name and labels", cp.Name, cp.Labels)
	}
	a, b := it.LabelRequirements(), cp.LabelRequirements()
	if reflect.ValueOf(a).Pointer() != reflect.ValueOf(b).Pointer() {
		t.Errorf("the copy worked its label requirements out again")
	}
}
