package aws

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
)

func TestInstanceTypesLeaveOutTypesNoAMIBoots(t *testing.T) {
	both := []awsv1.AMI{amiOf(amiAMD, "amd64"), amiOf(amiARM, "arm64")}
	cases := []struct {
		name  string
		alias string
		amis  []awsv1.AMI
		want  string
	}{
		{name: "both architectures", amis: both, want: "m5.large,m6g.large"},
		{name: "amd64 only", amis: []awsv1.AMI{amiOf(amiAMD, "amd64")}, want: "m5.large"},
		{name: "no AMI", amis: nil, want: ""},
		// a1 (the first Graviton) cannot boot AL2023 although its arm64
		// image matches; AL2 boots it.
		{name: "AL2023 leaves a1 out", alias: "al2023@latest", amis: both, want: "m5.large,m6g.large"},
		{name: "AL2 keeps a1", alias: "al2@latest", amis: both, want: "m5.large,m6g.large,a1.large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			class := readyClass(func(nc *awsv1.EC2NodeClass) {
				nc.Status.AMIs = tc.amis
				if tc.alias != "" {
					nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: tc.alias}}
				}
			})
			types := []*cloudprovider.InstanceType{
				itype("m5.large", "amd64", 2, 29, offering(zoneA, "on-demand", 0.096)),
				itype("m6g.large", "arm64", 2, 29, offering(zoneA, "on-demand", 0.077)),
			}
			if tc.alias != "" {
				a1 := itype("a1.large", "arm64", 2, 29, offering(zoneA, "on-demand", 0.051))
				a1.Labels["karpenter.k8s.aws/instance-family"] = "a1"
				types = append(types, a1)
			}
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: types}}
			p := newProvider(t, kubeWith(t, class), f)
			pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
				NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class.Name}}}}}
			its, err := p.InstanceTypes(context.Background(), pool)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, it := range its {
				names = append(names, it.Name)
			}
			if got := strings.Join(names, ","); got != tc.want {
				t.Fatalf("types %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTenancy(t *testing.T) {
	tests := []struct {
		name string
		reqs []v1.NodeSelectorRequirementWithMinValues
		want string
		err  bool
	}{
		{name: "no requirement: shared hardware", want: "default"},
		{name: "dedicated only", reqs: []v1.NodeSelectorRequirementWithMinValues{req(LabelInstanceTenancy, corev1.NodeSelectorOpIn, "dedicated")}, want: "dedicated"},
		{name: "either: the cheaper default", reqs: []v1.NodeSelectorRequirementWithMinValues{req(LabelInstanceTenancy, corev1.NodeSelectorOpIn, "dedicated", "default")}, want: "default"},
		{name: "not default", reqs: []v1.NodeSelectorRequirementWithMinValues{req(LabelInstanceTenancy, corev1.NodeSelectorOpNotIn, "default")}, want: "dedicated"},
		{name: "neither", reqs: []v1.NodeSelectorRequirementWithMinValues{req(LabelInstanceTenancy, corev1.NodeSelectorOpIn, "host")}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Tenancy(nodeClaim(tt.reqs...))
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("Tenancy = %q, %v; want %q, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// TestForLaunchTenancy: a NodeClaim that allows only dedicated tenancy gets
// templates that ask for it.
func TestForLaunchTenancy(t *testing.T) {
	for _, tt := range []struct {
		reqs []v1.NodeSelectorRequirementWithMinValues
		want string
	}{
		{nil, "default"},
		{[]v1.NodeSelectorRequirementWithMinValues{req(LabelInstanceTenancy, corev1.NodeSelectorOpIn, "dedicated")}, "dedicated"},
	} {
		ensurer := &fakeEnsurer{}
		l := &Launcher{Templates: ensurer, Cluster: testCluster}
		if _, err := l.ForLaunch(context.Background(), readyClass(), nodeClaim(tt.reqs...), []*cloudprovider.InstanceType{itype("m5.large", "amd64", 2, 29)}, spot); err != nil {
			t.Fatal(err)
		}
		if len(ensurer.inputs) != 1 || ensurer.inputs[0].Tenancy != tt.want {
			t.Errorf("requirements %v: templates %+v, want tenancy %s", tt.reqs, ensurer.inputs, tt.want)
		}
	}
}

// TestInstanceTypesByZoneID: a pool that requires zone IDs is planned only
// onto the offerings in those zones.
func TestInstanceTypesByZoneID(t *testing.T) {
	class := readyClass()
	types := []*cloudprovider.InstanceType{
		itype("m5.large", "amd64", 2, 29, offering(zoneA, "on-demand", 0.096), offering(zoneB, "on-demand", 0.097)),
		itype("c5.large", "amd64", 2, 29, offering(zoneA, "on-demand", 0.085)),
	}
	for _, tt := range []struct {
		name string
		reqs []v1.NodeSelectorRequirementWithMinValues
		want string
	}{
		{name: "no zone-id requirement", want: "m5.large:us-east-1a+us-east-1b,c5.large:us-east-1a"},
		{name: "use1-az2 only", reqs: []v1.NodeSelectorRequirementWithMinValues{req(LabelZoneID, corev1.NodeSelectorOpIn, "use1-az2")}, want: "m5.large:us-east-1b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, kubeWith(t, class), &fakes{instanceTypes: &fakeInstanceTypes{types: types}})
			pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
				NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class.Name}, Requirements: tt.reqs}}}}
			its, err := p.InstanceTypes(context.Background(), pool)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range its {
				var zones []string
				for _, o := range it.Offerings {
					zones = append(zones, o.Zone)
				}
				got = append(got, it.Name+":"+strings.Join(zones, "+"))
			}
			if strings.Join(got, ",") != tt.want {
				t.Fatalf("offerings %v, want %s", got, tt.want)
			}
			if len(types[0].Offerings) != 2 {
				t.Fatal("the provider's own types were changed")
			}
		})
	}
}

// TestCreateReserved: a NodeClaim that allows reserved capacity launches
// into the class's reservation with room, from a template that targets it,
// as an on-demand fleet; the NodeClaim is labelled as Karpenter labels it
// and the room is counted. A full reservation falls to the next capacity
// type, and a launch the reservation refuses marks it full, not on-demand.
// An on-demand launch that EC2 put into an open reservation is labelled
// on-demand, as it was launched.
func TestCreateReserved(t *testing.T) {
	reservations := []awsv1.CapacityReservation{
		{ID: "cr-1", InstanceType: "m5.large", AvailabilityZone: zoneA, ReservationType: "default", State: "active"},
		{ID: "cr-block", InstanceType: "m5.xlarge", AvailabilityZone: zoneA, ReservationType: "capacity-block", State: "active"},
		{ID: "cr-block-2", InstanceType: "m5.large", AvailabilityZone: zoneA, ReservationType: "capacity-block", State: "active"},
	}
	class := readyClass(func(nc *awsv1.EC2NodeClass) { nc.Status.CapacityReservations = reservations })
	reservedOrOnDemand := req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, v1.CapacityTypeReserved, onDemand)
	const id = "i-0123456789abcdef0"

	t.Run("into the reservation", func(t *testing.T) {
		inst := &instance.Instance{ID: id, Type: "m5.large", Zone: zoneA, SubnetID: "subnet-a", CapacityType: onDemand, CapacityReservationID: "cr-1"}
		f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{described: map[string]*instance.Instance{id: inst}},
			reservations: &fakeReservations{room: map[string]int32{"cr-1": 1, "cr-block": 1}}}
		p := newProvider(t, kubeWith(t, class), f)
		out, _, err := createStepping(t, p, f, nodeClaim(reservedOrOnDemand))
		if err != nil {
			t.Fatal(err)
		}
		r := f.instances.requests[0]
		want := []instance.Override{{LaunchTemplate: "lt-m5.large-cr-1", InstanceType: "m5.large", SubnetID: "subnet-a", Zone: zoneA, ZoneID: "use1-az1", Price: 0.096 * reservedPriceFactor}}
		if r.CapacityType != onDemand || !reflect.DeepEqual(r.Overrides, want) {
			t.Fatalf("request %s %+v; want an on-demand fleet into the default reservation alone, %+v", r.CapacityType, r.Overrides, want)
		}
		if l := out.Labels; l[v1.LabelCapacityType] != v1.CapacityTypeReserved || l["karpenter.k8s.aws/capacity-reservation-id"] != "cr-1" ||
			l["karpenter.k8s.aws/capacity-reservation-type"] != "default" || l["karpenter.k8s.aws/capacity-reservation-interruptible"] != "false" {
			t.Fatalf("labels %v", l)
		}
		if !reflect.DeepEqual(f.reservations.launched, []string{"cr-1"}) {
			t.Fatalf("launched into %v, want cr-1 counted", f.reservations.launched)
		}
	})
	t.Run("Capacity Blocks alone: one per launch, the cheapest", func(t *testing.T) {
		inst := &instance.Instance{ID: id, Type: "m5.large", Zone: zoneA, SubnetID: "subnet-a", CapacityType: onDemand, CapacityReservationID: "cr-block-2"}
		f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{described: map[string]*instance.Instance{id: inst}},
			reservations: &fakeReservations{room: map[string]int32{"cr-block": 1, "cr-block-2": 1}}}
		p := newProvider(t, kubeWith(t, class), f)
		if _, _, err := createStepping(t, p, f, nodeClaim(reservedOrOnDemand)); err != nil {
			t.Fatal(err)
		}
		r := f.instances.requests[0]
		if r.CapacityType != "capacity-block" || len(r.Overrides) != 1 || r.Overrides[0].LaunchTemplate != "lt-m5.large-cr-block-2" {
			t.Fatalf("request %s %+v; want a fleet of the cheaper block alone", r.CapacityType, r.Overrides)
		}
	})
	t.Run("a NodeClaim that names its reservation gets that one", func(t *testing.T) {
		inst := &instance.Instance{ID: id, Type: "m5.large", Zone: zoneA, SubnetID: "subnet-a", CapacityType: onDemand, CapacityReservationID: "cr-block-2"}
		f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{described: map[string]*instance.Instance{id: inst}},
			reservations: &fakeReservations{room: map[string]int32{"cr-1": 1, "cr-block-2": 1}}}
		p := newProvider(t, kubeWith(t, class), f)
		named := req("karpenter.k8s.aws/capacity-reservation-id", corev1.NodeSelectorOpIn, "cr-block-2")
		if _, _, err := createStepping(t, p, f, nodeClaim(reservedOrOnDemand, named)); err != nil {
			t.Fatal(err)
		}
		r := f.instances.requests[0]
		if len(r.Overrides) != 1 || r.Overrides[0].LaunchTemplate != "lt-m5.large-cr-block-2" {
			t.Fatalf("request %s %+v; want the named reservation alone (not cr-1, though default reservations come first)", r.CapacityType, r.Overrides)
		}
	})
	t.Run("a full reservation falls to on-demand", func(t *testing.T) {
		inst := &instance.Instance{ID: id, Type: "m5.large", Zone: zoneA, SubnetID: "subnet-a", CapacityType: onDemand}
		f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{described: map[string]*instance.Instance{id: inst}},
			reservations: &fakeReservations{room: map[string]int32{}}}
		p := newProvider(t, kubeWith(t, class), f)
		out, _, err := createStepping(t, p, f, nodeClaim(reservedOrOnDemand))
		if err != nil {
			t.Fatal(err)
		}
		if r := f.instances.requests[0]; r.CapacityType != onDemand || slices.ContainsFunc(r.Overrides, func(o instance.Override) bool { return strings.Contains(o.LaunchTemplate, "cr-") }) {
			t.Fatalf("request %+v; want a plain on-demand fleet", r)
		}
		if out.Labels[v1.LabelCapacityType] != onDemand || out.Labels["karpenter.k8s.aws/capacity-reservation-id"] != "" {
			t.Fatalf("labels %v", out.Labels)
		}
	})
	t.Run("an on-demand launch EC2 put into an open reservation stays on-demand", func(t *testing.T) {
		inst := &instance.Instance{ID: id, Type: "m5.large", Zone: zoneA, SubnetID: "subnet-a", CapacityType: onDemand, CapacityReservationID: "cr-open"}
		f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{described: map[string]*instance.Instance{id: inst}},
			reservations: &fakeReservations{room: map[string]int32{}}}
		p := newProvider(t, kubeWith(t, readyClass()), f)
		out, _, err := createStepping(t, p, f, nodeClaim(req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand)))
		if err != nil {
			t.Fatal(err)
		}
		if out.Labels[v1.LabelCapacityType] != onDemand || out.Labels["karpenter.k8s.aws/capacity-reservation-id"] != "" {
			t.Fatalf("labels %v; want on-demand and no reservation, as it was launched", out.Labels)
		}
		if len(f.reservations.launched) != 0 {
			t.Fatalf("counted a launch into %v", f.reservations.launched)
		}
	})
	t.Run("a refused launch marks the reservation full", func(t *testing.T) {
		f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()},
			instances:    &fakeInstances{createErr: &instance.InsufficientCapacityError{Offerings: []instance.Offering{{InstanceType: "m5.large", Zone: zoneA, CapacityType: onDemand}}}},
			reservations: &fakeReservations{room: map[string]int32{"cr-1": 1}}}
		p := newProvider(t, kubeWith(t, class), f)
		if _, err := p.Create(context.Background(), nodeClaim(reservedOrOnDemand)); err == nil {
			t.Fatal("Create succeeded")
		}
		if !reflect.DeepEqual(f.reservations.exhausted, []string{"cr-1"}) || len(f.unavailable.marked) != 0 {
			t.Fatalf("exhausted %v, unavailable %v; want cr-1 full and on-demand untouched", f.reservations.exhausted, f.unavailable.marked)
		}
	})
}
