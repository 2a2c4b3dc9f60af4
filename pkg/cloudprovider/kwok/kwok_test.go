package kwok

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	itKey   = corev1.LabelInstanceTypeStable
	zoneKey = corev1.LabelTopologyZone
	ctKey   = v1.LabelCapacityType
	in      = corev1.NodeSelectorOpIn
	notIn   = corev1.NodeSelectorOpNotIn
)

// catalogType looks a type up in the same catalog the provider uses, so
// expectations about shapes are not copied by hand.
func catalogType(t *testing.T, name string) *cloudprovider.InstanceType {
	t.Helper()
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("catalog has no %s", name)
	return nil
}

func TestCreateChoosesCheapestAvailableOffering(t *testing.T) {
	kube := kubeClient(t)
	// Prices in the catalog model (us-east-1): c5a.large on-demand 0.077,
	// spot a 0.0476 b 0.0473 c 0.0474; m5.large on-demand 0.096, spot
	// a 0.0444 b 0.0448 c 0.0447; m6g.large on-demand 0.077; t4g.micro has
	// 489Mi allocatable memory.
	tests := []struct {
		name     string
		reqs     []v1.NodeSelectorRequirementWithMinValues
		requests corev1.ResourceList
		ice      []Unavailable
		wantType string
		wantZone string
		wantCT   string
	}{
		{
			name:     "cheapest type on demand, first zone on a price tie",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large", "m5.large"), req(ctKey, in, v1.CapacityTypeOnDemand)},
			wantType: "c5a.large", wantZone: "us-east-1a", wantCT: v1.CapacityTypeOnDemand,
		},
		{
			name:     "spot wins when allowed and can change the type",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large", "m5.large")},
			wantType: "m5.large", wantZone: "us-east-1a", wantCT: v1.CapacityTypeSpot,
		},
		{
			name:     "spot in its cheapest zone",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large"), req(ctKey, in, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand)},
			wantType: "c5a.large", wantZone: "us-east-1b", wantCT: v1.CapacityTypeSpot,
		},
		{
			name:     "zone restricted with In",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large"), req(ctKey, in, v1.CapacityTypeOnDemand), req(zoneKey, in, "us-east-1c")},
			wantType: "c5a.large", wantZone: "us-east-1c", wantCT: v1.CapacityTypeOnDemand,
		},
		{
			name:     "zone restricted with NotIn",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "m5.large"), req(ctKey, in, v1.CapacityTypeSpot), req(zoneKey, notIn, "us-east-1a")},
			wantType: "m5.large", wantZone: "us-east-1c", wantCT: v1.CapacityTypeSpot,
		},
		{
			name:     "type-wide shortage falls back to the next type",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large", "m5.large"), req(ctKey, in, v1.CapacityTypeOnDemand)},
			ice:      []Unavailable{{InstanceType: "c5a.large"}},
			wantType: "m5.large", wantZone: "us-east-1a", wantCT: v1.CapacityTypeOnDemand,
		},
		{
			name:     "zone-wide shortage falls back to the next zone",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large"), req(ctKey, in, v1.CapacityTypeOnDemand)},
			ice:      []Unavailable{{Zone: "us-east-1a"}},
			wantType: "c5a.large", wantZone: "us-east-1b", wantCT: v1.CapacityTypeOnDemand,
		},
		{
			name:     "one offering short falls back to the next cheapest",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large"), req(ctKey, in, v1.CapacityTypeSpot)},
			ice:      []Unavailable{{InstanceType: "c5a.large", Zone: "us-east-1b", CapacityType: v1.CapacityTypeSpot}},
			wantType: "c5a.large", wantZone: "us-east-1c", wantCT: v1.CapacityTypeSpot,
		},
		{
			name:     "spot shortage everywhere falls back to on demand",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large", "m5.large")},
			ice:      []Unavailable{{CapacityType: v1.CapacityTypeSpot}},
			wantType: "c5a.large", wantZone: "us-east-1a", wantCT: v1.CapacityTypeOnDemand,
		},
		{
			name:     "requests that do not fit skip the type",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "t4g.micro", "c5a.large"), req(ctKey, in, v1.CapacityTypeOnDemand)},
			requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			wantType: "c5a.large", wantZone: "us-east-1a", wantCT: v1.CapacityTypeOnDemand,
		},
		{
			name:     "catalog labels constrain the type",
			reqs:     []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "m5.large", "m6g.large"), req(corev1.LabelArchStable, in, "arm64"), req(ctKey, in, v1.CapacityTypeOnDemand)},
			wantType: "m6g.large", wantZone: "us-east-1a", wantCT: v1.CapacityTypeOnDemand,
		},
		{
			name: "numeric operators on catalog labels",
			reqs: []v1.NodeSelectorRequirementWithMinValues{
				req("karpenter.k8s.aws/instance-family", in, "m5", "m6g"),
				req("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "5"),
				req("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpGte, "2"),
				req("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpLte, "2"),
				req(ctKey, in, v1.CapacityTypeOnDemand),
			},
			wantType: "m6g.large", wantZone: "us-east-1a", wantCT: v1.CapacityTypeOnDemand,
		},
		{
			name: "deprecated keys and keys no type carries",
			reqs: []v1.NodeSelectorRequirementWithMinValues{
				req("beta.kubernetes.io/instance-type", in, "c5a.large"),
				req("failure-domain.beta.kubernetes.io/zone", in, "us-east-1b"),
				req(v1.LabelNodePool, in, "default"),
				req("example.com/team", corev1.NodeSelectorOpExists),
				req(ctKey, in, v1.CapacityTypeOnDemand),
			},
			wantType: "c5a.large", wantZone: "us-east-1b", wantCT: v1.CapacityTypeOnDemand,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, kube, Options{InsufficientCapacity: tt.ice})
			nc := newNodeClaim(uniqueName("cheapest"), tt.reqs...)
			nc.Spec.Resources.Requests = tt.requests
			cleanupNode(t, kube, nc.Name)
			got, err := p.Create(context.Background(), nc)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if g := got.Labels[itKey]; g != tt.wantType {
				t.Errorf("instance type %q, want %q", g, tt.wantType)
			}
			if g := got.Labels[zoneKey]; g != tt.wantZone {
				t.Errorf("zone %q, want %q", g, tt.wantZone)
			}
			if g := got.Labels[ctKey]; g != tt.wantCT {
				t.Errorf("capacity type %q, want %q", g, tt.wantCT)
			}
			wantID := ProviderID("us-east-1", tt.wantZone, nc.Name)
			if got.Status.ProviderID != wantID {
				t.Errorf("provider ID %q, want %q", got.Status.ProviderID, wantID)
			}
			node := getNode(t, kube, nc.Name)
			if node.Labels[itKey] != tt.wantType || node.Labels[zoneKey] != tt.wantZone || node.Labels[ctKey] != tt.wantCT {
				t.Errorf("node labels type=%q zone=%q capacity-type=%q, want %q %q %q",
					node.Labels[itKey], node.Labels[zoneKey], node.Labels[ctKey], tt.wantType, tt.wantZone, tt.wantCT)
			}
		})
	}
}

func TestCreateInsufficientCapacity(t *testing.T) {
	kube := kubeClient(t)
	tests := []struct {
		name        string
		reqs        []v1.NodeSelectorRequirementWithMinValues
		requests    corev1.ResourceList
		ice         []Unavailable
		wantMessage []string
	}{
		{
			name:        "only type short everywhere",
			reqs:        []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large")},
			ice:         []Unavailable{{InstanceType: "c5a.large"}},
			wantMessage: []string{"c5a.large", "1 instance types", "unavailable"},
		},
		{
			name:        "only allowed zone short",
			reqs:        []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large", "m5.large"), req(zoneKey, in, "us-east-1a")},
			ice:         []Unavailable{{Zone: "us-east-1a"}},
			wantMessage: []string{"c5a.large,m5.large", "us-east-1a", "2 instance types"},
		},
		{
			name:        "every fallback short",
			reqs:        []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large", "m5.large"), req(ctKey, in, v1.CapacityTypeOnDemand)},
			ice:         []Unavailable{{InstanceType: "c5a.large"}, {InstanceType: "m5.large", CapacityType: v1.CapacityTypeOnDemand}},
			wantMessage: []string{"on-demand", "unavailable"},
		},
		{
			name:        "no type satisfies the requirements",
			reqs:        []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "m5.large"), req(corev1.LabelArchStable, in, "arm64")},
			wantMessage: []string{"no instance type", "kubernetes.io/arch In [arm64]"},
		},
		{
			name:        "requests fit no allowed type",
			reqs:        []v1.NodeSelectorRequirementWithMinValues{req(itKey, in, "c5a.large")},
			requests:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			wantMessage: []string{"no instance type", "cpu=4"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, kube, Options{InsufficientCapacity: tt.ice})
			nc := newNodeClaim(uniqueName("ice"), tt.reqs...)
			nc.Spec.Resources.Requests = tt.requests
			cleanupNode(t, kube, nc.Name)
			got, err := p.Create(context.Background(), nc)
			if !cloudprovider.IsInsufficientCapacity(err) {
				t.Fatalf("Create = %v, %v; want an InsufficientCapacityError", got, err)
			}
			for _, s := range append(tt.wantMessage, nc.Name) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if nodeExists(t, kube, nc.Name) {
				t.Errorf("a Node was created despite the capacity error")
			}
		})
	}
}

func TestInstanceTypesMarkShortagesUnavailable(t *testing.T) {
	p := newProvider(t, kubeClient(t), Options{
		Region: "eu-west-1", Zones: []string{"eu-west-1a", "eu-west-1b"},
		InsufficientCapacity: []Unavailable{{InstanceType: "m5.large", Zone: "eu-west-1b"}, {CapacityType: v1.CapacityTypeSpot, Zone: "eu-west-1a"}},
	})
	its, err := p.InstanceTypes(context.Background(), &v1.NodePool{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := catalog.InstanceTypes(catalog.Options{Region: "eu-west-1", Zones: []string{"eu-west-1a", "eu-west-1b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(its) != len(want) {
		t.Fatalf("%d instance types, want the catalog's %d", len(its), len(want))
	}
	var m5 *cloudprovider.InstanceType
	for _, it := range its {
		if it.Labels[corev1.LabelTopologyRegion] != "eu-west-1" {
			t.Fatalf("%s has region label %q", it.Name, it.Labels[corev1.LabelTopologyRegion])
		}
		if it.Name == "m5.large" {
			m5 = it
		}
	}
	if m5 == nil {
		t.Fatal("no m5.large")
	}
	wantAvailable := map[string]bool{
		"eu-west-1a/on-demand": true, "eu-west-1a/spot": false,
		"eu-west-1b/on-demand": false, "eu-west-1b/spot": false,
	}
	if len(m5.Offerings) != len(wantAvailable) {
		t.Fatalf("m5.large has %d offerings, want %d", len(m5.Offerings), len(wantAvailable))
	}
	for _, o := range m5.Offerings {
		if w := wantAvailable[o.Zone+"/"+o.CapacityType]; o.Available != w {
			t.Errorf("m5.large %s %s available=%v, want %v", o.Zone, o.CapacityType, o.Available, w)
		}
	}
	// The cache is shared, the slice is not: a caller reordering it must not
	// reorder the next caller's.
	its[0], its[1] = its[1], its[0]
	again, _ := p.InstanceTypes(context.Background(), nil)
	if again[0].Name != want[0].Name {
		t.Errorf("InstanceTypes returned a slice a caller could reorder")
	}
}

// TestAPIServerKeepsNodeStatusOnCreate pins down the behaviour Create relies
// on: unlike most resources, a Node's status survives Create (kubelets
// register that way), so capacity is right from the first moment kwok sees
// the Node.
func TestAPIServerKeepsNodeStatusOnCreate(t *testing.T) {
	kube := kubeClient(t)
	name := uniqueName("plain")
	cleanupNode(t, kube, name)
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("5Gi")}
	// No kwok annotation: nothing but the apiserver touches this Node.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Capacity: want, Allocatable: want}}
	if err := kube.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	got := getNode(t, kube, name)
	if !resourcesEqual(got.Status.Capacity, want) || !resourcesEqual(got.Status.Allocatable, want) {
		t.Fatalf("stored status capacity {%s} allocatable {%s}, want {%s}", fmtResources(got.Status.Capacity), fmtResources(got.Status.Allocatable), fmtResources(want))
	}
}

func TestCreatedNode(t *testing.T) {
	kube := kubeClient(t)
	ctx := context.Background()
	p := newProvider(t, kube, Options{})
	// The NodeClaim goes through the apiserver so that it is one our CRD
	// accepts, defaults included.
	nc := newNodeClaim(uniqueName("node"), req(itKey, in, "m6g.large"), req(ctKey, in, v1.CapacityTypeOnDemand), req(zoneKey, in, "us-east-1b"))
	nc.Labels["example.com/team"] = "payments"
	nc.Spec.Taints = []corev1.Taint{{Key: "example.com/dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule}}
	nc.Spec.StartupTaints = []corev1.Taint{{Key: "example.com/cni-not-ready", Effect: corev1.TaintEffectNoExecute}}
	nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("3")}
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatalf("creating NodeClaim: %v", err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), nc) })
	cleanupNode(t, kube, nc.Name)

	got, err := p.Create(ctx, nc)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	it := catalogType(t, "m6g.large")
	wantID := "kwok://us-east-1/us-east-1b/" + nc.Name

	t.Run("returned NodeClaim", func(t *testing.T) {
		if got == nc {
			t.Error("Create returned its argument instead of a copy")
		}
		if got.Name != nc.Name || got.Spec.NodeClassRef == nil || got.Spec.NodeClassRef.Name != "default" {
			t.Errorf("metadata or spec lost: name %q, nodeClassRef %+v", got.Name, got.Spec.NodeClassRef)
		}
		if got.Status.ProviderID != wantID {
			t.Errorf("provider ID %q, want %q", got.Status.ProviderID, wantID)
		}
		if got.Status.ImageID != ImageID {
			t.Errorf("image ID %q, want %q", got.Status.ImageID, ImageID)
		}
		if !resourcesEqual(got.Status.Capacity, it.Capacity) || !resourcesEqual(got.Status.Allocatable, it.Allocatable) {
			t.Errorf("capacity {%s} allocatable {%s}, want {%s} {%s}", fmtResources(got.Status.Capacity), fmtResources(got.Status.Allocatable), fmtResources(it.Capacity), fmtResources(it.Allocatable))
		}
		wantLabels := map[string]string{
			itKey: "m6g.large", zoneKey: "us-east-1b", corev1.LabelTopologyRegion: "us-east-1", ctKey: v1.CapacityTypeOnDemand,
			corev1.LabelArchStable: "arm64", corev1.LabelOSStable: "linux",
			"karpenter.k8s.aws/instance-family": "m6g", "karpenter.k8s.aws/instance-cpu": "2",
			v1.LabelNodePool: "default", "example.com/team": "payments",
		}
		for k, v := range wantLabels {
			if got.Labels[k] != v {
				t.Errorf("label %s=%q, want %q", k, got.Labels[k], v)
			}
		}
		for _, k := range []string{corev1.LabelHostname, LabelInstance} {
			if _, ok := got.Labels[k]; ok {
				t.Errorf("NodeClaim carries node-only label %s", k)
			}
		}
		if nc.Status.ProviderID != "" || nc.Labels[itKey] != "" {
			t.Error("Create modified its argument")
		}
	})

	node := getNode(t, kube, nc.Name)
	t.Run("Node", func(t *testing.T) {
		if node.Annotations[AnnotationKwokNode] != "fake" {
			t.Errorf("annotation %s=%q, want fake", AnnotationKwokNode, node.Annotations[AnnotationKwokNode])
		}
		if node.Spec.ProviderID != wantID {
			t.Errorf("provider ID %q, want %q", node.Spec.ProviderID, wantID)
		}
		region, zone, name, err := ParseProviderID(node.Spec.ProviderID)
		if err != nil || region != "us-east-1" || zone != "us-east-1b" || name != nc.Name {
			t.Errorf("ParseProviderID(%q) = %q, %q, %q, %v", node.Spec.ProviderID, region, zone, name, err)
		}
		wantLabels := map[string]string{}
		for k, v := range it.Labels {
			wantLabels[k] = v
		}
		for k, v := range map[string]string{
			itKey: "m6g.large", zoneKey: "us-east-1b", corev1.LabelTopologyRegion: "us-east-1", ctKey: v1.CapacityTypeOnDemand,
			corev1.LabelArchStable: "arm64", corev1.LabelOSStable: "linux", corev1.LabelHostname: nc.Name,
			v1.LabelNodePool: "default", "example.com/team": "payments", LabelInstance: "true",
		} {
			wantLabels[k] = v
		}
		for k, v := range wantLabels {
			if node.Labels[k] != v {
				t.Errorf("label %s=%q, want %q", k, node.Labels[k], v)
			}
		}
		for _, want := range []corev1.Taint{nc.Spec.Taints[0], nc.Spec.StartupTaints[0], v1.UnregisteredNoExecuteTaint} {
			if !hasTaint(node.Spec.Taints, want) {
				t.Errorf("taints %v lack %v", node.Spec.Taints, want)
			}
		}
		if !resourcesEqual(node.Status.Capacity, it.Capacity) {
			t.Errorf("status.capacity {%s}, want {%s}", fmtResources(node.Status.Capacity), fmtResources(it.Capacity))
		}
		if !resourcesEqual(node.Status.Allocatable, it.Allocatable) {
			t.Errorf("status.allocatable {%s}, want {%s}", fmtResources(node.Status.Allocatable), fmtResources(it.Allocatable))
		}
	})

	t.Run("kwok makes it Ready and keeps its shape", func(t *testing.T) {
		var n *corev1.Node
		eventually(t, 60*time.Second, "kwok to report the Node Ready", func() bool {
			n = getNode(t, kube, nc.Name)
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == corev1.ConditionTrue
				}
			}
			return false
		})
		if !resourcesEqual(n.Status.Capacity, it.Capacity) || !resourcesEqual(n.Status.Allocatable, it.Allocatable) {
			t.Errorf("after kwok: capacity {%s} allocatable {%s}, want {%s} {%s}", fmtResources(n.Status.Capacity), fmtResources(n.Status.Allocatable), fmtResources(it.Capacity), fmtResources(it.Allocatable))
		}
		if n.Status.NodeInfo.Architecture != "arm64" {
			t.Errorf("nodeInfo.architecture %q, want arm64", n.Status.NodeInfo.Architecture)
		}
		if !hasTaint(n.Spec.Taints, v1.UnregisteredNoExecuteTaint) {
			t.Errorf("the unregistered taint is gone before Joiner registered the Node: %v", n.Spec.Taints)
		}
	})
}

func hasTaint(taints []corev1.Taint, want corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool {
		return t.Key == want.Key && t.Value == want.Value && t.Effect == want.Effect
	})
}

func TestCreateIsIdempotent(t *testing.T) {
	kube := kubeClient(t)
	ctx := context.Background()

	t.Run("retry returns the existing machine", func(t *testing.T) {
		nc := newNodeClaim(uniqueName("retry"), req(itKey, in, "c5a.large"), req(ctKey, in, v1.CapacityTypeOnDemand))
		cleanupNode(t, kube, nc.Name)
		first, err := newProvider(t, kube, Options{}).Create(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		uid := getNode(t, kube, nc.Name).UID
		// A restarted controller whose cloud now lacks that offering still
		// gets back the machine it launched, with no boot delay.
		restarted := newProvider(t, kube, Options{InsufficientCapacity: []Unavailable{{InstanceType: "c5a.large"}}, LaunchDelay: time.Hour, Clock: clocktesting.NewFakeClock(time.Now())})
		second, err := restarted.Create(ctx, nc)
		if err != nil {
			t.Fatalf("retried Create: %v", err)
		}
		if second.Status.ProviderID != first.Status.ProviderID {
			t.Errorf("retried Create gave provider ID %q, first gave %q", second.Status.ProviderID, first.Status.ProviderID)
		}
		if second.Labels[zoneKey] != first.Labels[zoneKey] || second.Labels[itKey] != first.Labels[itKey] {
			t.Errorf("retried Create labels differ: %v vs %v", second.Labels, first.Labels)
		}
		if n := getNode(t, kube, nc.Name); n.UID != uid {
			t.Errorf("the Node was replaced (UID %s, was %s)", n.UID, uid)
		}
	})

	t.Run("retry repairs a Node whose status was lost", func(t *testing.T) {
		nc := newNodeClaim(uniqueName("repair"), req(itKey, in, "m5.large"))
		cleanupNode(t, kube, nc.Name)
		// What a Create interrupted before the status stuck would leave,
		// with kwok's defaults filled in.
		kwokDefaults := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1k"), corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("1M")}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: map[string]string{LabelInstance: "true", itKey: "m5.large", zoneKey: "us-east-1a"}},
			Spec:       corev1.NodeSpec{ProviderID: ProviderID("us-east-1", "us-east-1a", nc.Name)},
			Status:     corev1.NodeStatus{Capacity: kwokDefaults, Allocatable: kwokDefaults},
		}
		if err := kube.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		got, err := newProvider(t, kube, Options{}).Create(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		it := catalogType(t, "m5.large")
		if got.Status.ProviderID != node.Spec.ProviderID {
			t.Errorf("provider ID %q, want %q", got.Status.ProviderID, node.Spec.ProviderID)
		}
		n := getNode(t, kube, nc.Name)
		if !resourcesEqual(n.Status.Capacity, it.Capacity) || !resourcesEqual(n.Status.Allocatable, it.Allocatable) {
			t.Errorf("status not repaired: capacity {%s} allocatable {%s}", fmtResources(n.Status.Capacity), fmtResources(n.Status.Allocatable))
		}
	})

	t.Run("a foreign Node with the name is an error, not an adoption", func(t *testing.T) {
		nc := newNodeClaim(uniqueName("foreign"), req(itKey, in, "m5.large"))
		cleanupNode(t, kube, nc.Name)
		if err := kube.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}}); err != nil {
			t.Fatal(err)
		}
		_, err := newProvider(t, kube, Options{}).Create(ctx, nc)
		if err == nil || cloudprovider.IsInsufficientCapacity(err) || !strings.Contains(err.Error(), "not a kwok instance") {
			t.Fatalf("Create over a foreign Node = %v, want a not-a-kwok-instance error", err)
		}
		if n := getNode(t, kube, nc.Name); n.Labels[LabelInstance] != "" || n.Spec.ProviderID != "" {
			t.Errorf("the foreign Node was modified: labels %v, provider ID %q", n.Labels, n.Spec.ProviderID)
		}
	})
}

func TestLaunchDelay(t *testing.T) {
	kube := kubeClient(t)
	const delay = 30 * time.Second

	t.Run("Create waits for the clock", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Now())
		p := newProvider(t, kube, Options{LaunchDelay: delay, Clock: fc})
		nc := newNodeClaim(uniqueName("delay"), req(itKey, in, "c5a.large"))
		cleanupNode(t, kube, nc.Name)
		type result struct {
			nc  *v1.NodeClaim
			err error
		}
		done := make(chan result, 1)
		go func() {
			got, err := p.Create(context.Background(), nc)
			done <- result{got, err}
		}()
		eventually(t, 10*time.Second, "Create to wait on the clock", fc.HasWaiters)
		fc.Step(delay - time.Second)
		select {
		case r := <-done:
			t.Fatalf("Create returned before the launch delay passed: %v, %v", r.nc, r.err)
		case <-time.After(500 * time.Millisecond):
		}
		if nodeExists(t, kube, nc.Name) {
			t.Fatal("the Node appeared before the launch delay passed")
		}
		fc.Step(time.Second)
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("Create: %v", r.err)
			}
			if r.nc.Status.ProviderID == "" {
				t.Error("Create returned no provider ID")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Create did not return after the launch delay passed")
		}
		if !nodeExists(t, kube, nc.Name) {
			t.Error("no Node after Create returned")
		}
	})

	t.Run("a cancelled Create launches nothing", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Now())
		p := newProvider(t, kube, Options{LaunchDelay: delay, Clock: fc})
		nc := newNodeClaim(uniqueName("cancel"), req(itKey, in, "c5a.large"))
		cleanupNode(t, kube, nc.Name)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := p.Create(ctx, nc)
			done <- err
		}()
		eventually(t, 10*time.Second, "Create to wait on the clock", fc.HasWaiters)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Create = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Create ignored the cancelled context")
		}
		fc.Step(delay)
		if nodeExists(t, kube, nc.Name) {
			t.Error("a cancelled Create made a Node")
		}
	})
}
