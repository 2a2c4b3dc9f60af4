package overlay

import (
	"math"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func mkOverlay(name string, weight int32, mod func(*v1alpha1.NodeOverlaySpec), reqs ...v1alpha1.NodeSelectorRequirement) *v1alpha1.NodeOverlay {
	o := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeOverlaySpec{Requirements: reqs}}
	if weight != 0 {
		o.Spec.Weight = ptr(weight)
	}
	if mod != nil {
		mod(&o.Spec)
	}
	return o
}

func in(key string, values ...string) v1alpha1.NodeSelectorRequirement {
	return v1alpha1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func adjust(s string) func(*v1alpha1.NodeOverlaySpec) {
	return func(sp *v1alpha1.NodeOverlaySpec) { sp.PriceAdjustment = ptr(s) }
}

func price(s string) func(*v1alpha1.NodeOverlaySpec) {
	return func(sp *v1alpha1.NodeOverlaySpec) { sp.Price = ptr(s) }
}

func capacity(kv ...string) func(*v1alpha1.NodeOverlaySpec) {
	return func(sp *v1alpha1.NodeOverlaySpec) {
		sp.Capacity = corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			sp.Capacity[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
	}
}

func compile(t *testing.T, nos ...*v1alpha1.NodeOverlay) []*Overlay {
	t.Helper()
	var out []*Overlay
	for _, no := range nos {
		o, err := Compile(no)
		if err != nil {
			t.Fatalf("compile %s: %v", no.Name, err)
		}
		out = append(out, o)
	}
	Sort(out)
	return out
}

// types are two instance types, each on-demand and spot in two zones.
func types() []*cloudprovider.InstanceType {
	mk := func(name, family string, od float64) *cloudprovider.InstanceType {
		it := &cloudprovider.InstanceType{Name: name,
			Labels:      map[string]string{corev1.LabelInstanceTypeStable: name, "karpenter.k8s.aws/instance-family": family},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi")},
		}
		for _, z := range []string{"us-east-1a", "us-east-1b"} {
			it.Offerings = append(it.Offerings,
				cloudprovider.Offering{Zone: z, CapacityType: "on-demand", Price: od, Available: true},
				cloudprovider.Offering{Zone: z, CapacityType: "spot", Price: od / 2, Available: true})
		}
		return it
	}
	return []*cloudprovider.InstanceType{mk("m5.large", "m5", 0.096), mk("c5.large", "c5", 0.085)}
}

func priceOf(its []*cloudprovider.InstanceType, name, zone, ct string) float64 {
	for _, it := range its {
		for _, o := range it.Offerings {
			if it.Name == name && o.Zone == zone && o.CapacityType == ct {
				return o.Price
			}
		}
	}
	return -1
}

func TestPrice(t *testing.T) {
	pool := Pool{Name: "default", Labels: map[string]string{"team": "web"}}
	cases := []struct {
		name     string
		overlays []*v1alpha1.NodeOverlay
		// want maps type/zone/capacity type to the price.
		want map[[3]string]float64
	}{
		{"a family at -50%", []*v1alpha1.NodeOverlay{mkOverlay("half", 0, adjust("-50%"), in("karpenter.k8s.aws/instance-family", "m5"))},
			map[[3]string]float64{{"m5.large", "us-east-1a", "on-demand"}: 0.048, {"m5.large", "us-east-1b", "spot"}: 0.024, {"c5.large", "us-east-1a", "on-demand"}: 0.085}},
		{"a rise in percent", []*v1alpha1.NodeOverlay{mkOverlay("more", 0, adjust("+10%"), in("karpenter.k8s.aws/instance-family", "c5"))},
			map[[3]string]float64{{"c5.large", "us-east-1a", "on-demand"}: 0.0935}},
		{"an absolute cut stops at zero", []*v1alpha1.NodeOverlay{mkOverlay("free", 0, adjust("-1"))},
			map[[3]string]float64{{"c5.large", "us-east-1a", "on-demand"}: 0, {"m5.large", "us-east-1b", "spot"}: 0}},
		{"-100% is free", []*v1alpha1.NodeOverlay{mkOverlay("free", 0, adjust("-100%"))},
			map[[3]string]float64{{"m5.large", "us-east-1a", "on-demand"}: 0}},
		{"a price on spot alone", []*v1alpha1.NodeOverlay{mkOverlay("spot", 0, price("0.01"), in("karpenter.sh/capacity-type", "spot"))},
			map[[3]string]float64{{"m5.large", "us-east-1a", "spot"}: 0.01, {"m5.large", "us-east-1a", "on-demand"}: 0.096}},
		{"a price in one zone", []*v1alpha1.NodeOverlay{mkOverlay("zone", 0, price("1"), in(corev1.LabelTopologyZone, "us-east-1b"))},
			map[[3]string]float64{{"c5.large", "us-east-1b", "on-demand"}: 1, {"c5.large", "us-east-1a", "on-demand"}: 0.085}},
		{"the pool's template label selects", []*v1alpha1.NodeOverlay{mkOverlay("team", 0, price("2"), in("team", "web"))},
			map[[3]string]float64{{"c5.large", "us-east-1a", "on-demand"}: 2}},
		{"another pool's name does not", []*v1alpha1.NodeOverlay{mkOverlay("other", 0, price("2"), in("karpenter.sh/nodepool", "other"))},
			map[[3]string]float64{{"c5.large", "us-east-1a", "on-demand"}: 0.085}},
		{"a label no node carries selects nothing", []*v1alpha1.NodeOverlay{mkOverlay("gpu", 0, price("2"), in("karpenter.k8s.aws/instance-gpu-name", "t4"))},
			map[[3]string]float64{{"c5.large", "us-east-1a", "on-demand"}: 0.085}},
		{"the higher weight wins", []*v1alpha1.NodeOverlay{
			mkOverlay("low", 1, price("1")), mkOverlay("high", 10, price("3"), in("karpenter.k8s.aws/instance-family", "m5"))},
			map[[3]string]float64{{"m5.large", "us-east-1a", "on-demand"}: 3, {"c5.large", "us-east-1a", "on-demand"}: 1}},
		{"overlays do not stack", []*v1alpha1.NodeOverlay{mkOverlay("a", 5, adjust("-50%")), mkOverlay("b", 1, adjust("-50%"))},
			map[[3]string]float64{{"m5.large", "us-east-1a", "on-demand"}: 0.048}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := types()
			out := Apply(pool, in, compile(t, tc.overlays...))
			for k, want := range tc.want {
				if got := priceOf(out, k[0], k[1], k[2]); math.Abs(got-want) > 1e-9 {
					t.Errorf("%v: $%g, want $%g", k, got, want)
				}
			}
			if got := priceOf(in, "m5.large", "us-east-1a", "on-demand"); got != 0.096 {
				t.Errorf("the input was changed: $%g", got)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	pool := Pool{Name: "default"}
	out := Apply(pool, types(), compile(t,
		mkOverlay("devices", 0, capacity("example.com/device", "4", "hugepages-2Mi", "1Gi"), in("karpenter.k8s.aws/instance-family", "m5")),
		mkOverlay("more-devices", 5, capacity("example.com/device", "8"), in(corev1.LabelTopologyZone, "us-east-1b"))))
	m5, c5 := out[0], out[1]
	if !m5.CapacityOverlaid || m5.PriceOverlaid || !c5.CapacityOverlaid {
		t.Fatalf("overlaid: m5 capacity %v price %v, c5 capacity %v", m5.CapacityOverlaid, m5.PriceOverlaid, c5.CapacityOverlaid)
	}
	for _, tc := range []struct {
		it   *cloudprovider.InstanceType
		list corev1.ResourceList
		name corev1.ResourceName
		want string
	}{
		// The weightier overlay selects a zone of each type, so it sets the
		// resource of both; hugepages come from the other.
		{m5, m5.Allocatable, "example.com/device", "8"},
		{c5, c5.Allocatable, "example.com/device", "8"},
		{m5, m5.Capacity, "hugepages-2Mi", "1Gi"},
		{m5, m5.Allocatable, corev1.ResourceMemory, "6Gi"},
		{m5, m5.Capacity, corev1.ResourceMemory, "8Gi"},
		{c5, c5.Allocatable, corev1.ResourceMemory, "7Gi"},
	} {
		q := tc.list[tc.name]
		if q.Cmp(resource.MustParse(tc.want)) != 0 {
			t.Errorf("%s %s = %s, want %s", tc.it.Name, tc.name, q.String(), tc.want)
		}
	}
	if _, ok := types()[0].Allocatable["example.com/device"]; ok {
		t.Fatal("the input was changed")
	}
}

func TestConflicts(t *testing.T) {
	pools := []Pool{{Name: "default"}}
	byPool := map[string][]*cloudprovider.InstanceType{"default": types()}
	cases := []struct {
		name     string
		overlays []*v1alpha1.NodeOverlay
		want     string
	}{
		{"two prices at one weight on one offering", []*v1alpha1.NodeOverlay{
			mkOverlay("a", 1, price("1")), mkOverlay("b", 1, price("2"), in("karpenter.k8s.aws/instance-family", "m5"))}, "a"},
		{"different weights do not conflict", []*v1alpha1.NodeOverlay{
			mkOverlay("a", 1, price("1")), mkOverlay("b", 2, price("2"))}, ""},
		{"disjoint offerings do not conflict", []*v1alpha1.NodeOverlay{
			mkOverlay("a", 1, price("1"), in("karpenter.sh/capacity-type", "spot")), mkOverlay("b", 1, price("2"), in("karpenter.sh/capacity-type", "on-demand"))}, ""},
		{"a price and a capacity do not conflict", []*v1alpha1.NodeOverlay{
			mkOverlay("a", 1, price("1")), mkOverlay("b", 1, capacity("example.com/device", "1"))}, ""},
		{"one capacity resource at one weight", []*v1alpha1.NodeOverlay{
			mkOverlay("a", 1, capacity("example.com/device", "1")), mkOverlay("b", 1, capacity("example.com/fpga", "1")), mkOverlay("c", 1, capacity("example.com/device", "2"))}, "a"},
		{"a conflicting overlay claims nothing", []*v1alpha1.NodeOverlay{
			mkOverlay("c", 1, price("1"), in("karpenter.k8s.aws/instance-family", "m5")),
			mkOverlay("b", 1, price("2")),
			mkOverlay("a", 1, price("3"), in("karpenter.k8s.aws/instance-family", "c5"))}, "b"},
		{"hidden ties under a weightier overlay", []*v1alpha1.NodeOverlay{
			mkOverlay("top", 9, price("1")), mkOverlay("a", 1, price("2")), mkOverlay("b", 1, price("3"))}, "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Conflicts(compile(t, tc.overlays...), pools, byPool)
			var names []string
			for n := range got {
				names = append(names, n)
			}
			if strings.Join(names, ",") != tc.want {
				t.Fatalf("conflicts %v, want %q", names, tc.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name string
		o    *v1alpha1.NodeOverlay
		want string
	}{
		{"an AWS resource", mkOverlay("x", 0, capacity("vpc.amazonaws.com/pod-eni", "1")), "invalid capacity: vpc.amazonaws.com/pod-eni in resource, restricted"},
		{"a value that is not a label value", mkOverlay("x", 0, nil, in("team", "a b")), `spec.requirements[0].values[0]: "a b" is not a label value`},
		{"NotIn without values", mkOverlay("x", 0, nil, v1alpha1.NodeSelectorRequirement{Key: "team", Operator: corev1.NodeSelectorOpNotIn}), "key team with operator NotIn must have a value defined"},
		{"an unsigned adjustment", mkOverlay("x", 0, adjust("5")), "spec.priceAdjustment \"5\""},
		{"Gt with a word", mkOverlay("x", 0, nil, v1alpha1.NodeSelectorRequirement{Key: "karpenter.k8s.aws/instance-cpu", Operator: corev1.NodeSelectorOpGt, Values: []string{"many"}}), "needs an integer value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
