package metrics_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	clustermetrics "github.com/joiner-autoscaler/joiner/pkg/controllers/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/overlay"
	"github.com/joiner-autoscaler/joiner/pkg/state"
)

func node(name, pool string, cpu string) *corev1.Node {
	labels := map[string]string{corev1.LabelArchStable: "amd64", corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a"}
	if pool != "" {
		labels[v1.LabelNodePool] = pool
		labels[v1.LabelCapacityType] = "spot"
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
}

func pod(name, nodeName, cpu string, daemon bool, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if daemon {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u"}}
	} else {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "r"}}
	}
	return p
}

// series gathers the collector's output as "name{label=value,...} value",
// the labels sorted, one line per series.
func series(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			out[key(f.GetName(), m)] = m.GetGauge().GetValue()
		}
	}
	return out
}

func key(name string, m *dto.Metric) string {
	var kv []string
	for _, l := range m.Label {
		kv = append(kv, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(kv)
	return name + "{" + strings.Join(kv, ",") + "}"
}

func TestStateCollector(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.NodePoolSpec{Limits: v1.Limits{corev1.ResourceCPU: resource.MustParse("100")}}}
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(
		pool,
		node("a", "default", "2"), node("b", "default", "4"), node("static", "", "2"),
		pod("web", "a", "500m", false, corev1.PodRunning),
		pod("web-2", "a", "250m", false, corev1.PodRunning),
		pod("done", "a", "1", false, corev1.PodSucceeded),
		pod("agent", "a", "100m", true, corev1.PodRunning),
		pod("pending", "", "1", false, corev1.PodPending),
	).Build()
	got := series(t, &clustermetrics.State{Reader: kube, Cluster: &state.Cluster{Client: kube}})

	nodeLabels := func(n, pool, typ, capacity string) string {
		return fmt.Sprintf("arch=amd64,capacity_type=%s,instance_type=m5.large,node_name=%s,nodepool=%s,os=,region=,resource_type=%s,zone=us-east-1a", capacity, n, pool, typ)
	}
	tests := []struct {
		series string
		want   float64
	}{
		{"karpenter_nodes_allocatable{" + nodeLabels("a", "default", "cpu", "spot") + "}", 2},
		{"karpenter_nodes_allocatable{" + nodeLabels("static", "N/A", "cpu", "") + "}", 2},
		// The finished pod's request is not the node's any more.
		{"karpenter_nodes_total_pod_requests{" + nodeLabels("a", "default", "cpu", "spot") + "}", 0.75},
		{"karpenter_nodes_total_daemon_requests{" + nodeLabels("a", "default", "cpu", "spot") + "}", 0.1},
		// Every allocatable resource has a requests series, zero when none.
		{"karpenter_nodes_total_pod_requests{" + nodeLabels("b", "default", "memory", "spot") + "}", 0},
		// Pods ask for no pods resource, as in Karpenter's metric.
		{"karpenter_nodes_allocatable{" + nodeLabels("a", "default", "pods", "spot") + "}", 110},
		{"karpenter_nodes_total_pod_requests{" + nodeLabels("a", "default", "pods", "spot") + "}", 0},
		{"karpenter_nodepools_usage{nodepool=default,resource_type=cpu}", 6},
		{"karpenter_nodepools_limit{nodepool=default,resource_type=cpu}", 100},
		// Karpenter's labels: the owner's selfLink path, scheduled when bound,
		// managed when a NodePool owns the node.
		{"karpenter_pods_state{arch=amd64,capacity_type=spot,instance_type=m5.large,managed=true,name=web,namespace=default,node=a,nodepool=default,owner=/apis/apps/v1/namespaces/default/replicasets/web-1,phase=Running,ready=false,scheduled=true,zone=us-east-1a}", 1},
		{"karpenter_pods_state{arch=,capacity_type=,instance_type=,managed=false,name=pending,namespace=default,node=,nodepool=,owner=/apis/apps/v1/namespaces/default/replicasets/web-1,phase=Pending,ready=false,scheduled=false,zone=}", 1},
	}
	for _, tt := range tests {
		v, ok := got[tt.series]
		if !ok {
			var near []string
			name := tt.series[:strings.Index(tt.series, "{")]
			for k := range got {
				if strings.HasPrefix(k, name+"{") {
					near = append(near, k)
				}
			}
			sort.Strings(near)
			t.Errorf("no series %s; have:\n  %s", tt.series, strings.Join(near, "\n  "))
			continue
		}
		if v != tt.want {
			t.Errorf("%s = %v, want %v", tt.series, v, tt.want)
		}
	}
}

func TestPodsObserve(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	created := metav1.NewTime(clk.Now().Add(-40 * time.Second))
	claimCreated := metav1.NewTime(clk.Now().Add(-30 * time.Second))
	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x", CreationTimestamp: claimCreated},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-a"}}
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(node("a", "default", "2"), node("static", "", "2"), claim).
		WithIndex(&v1.NodeClaim{}, lifecycle.ProviderIDIndex, func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Status.ProviderID} }).
		Build()
	p := &clustermetrics.Pods{Reader: kube, Clock: clk}

	pending := pod("web", "", "1", false, corev1.PodPending)
	pending.CreationTimestamp = created
	bound := pending.DeepCopy()
	bound.Spec.NodeName = "a"
	running := bound.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	older := pending.DeepCopy()
	older.CreationTimestamp = metav1.NewTime(claimCreated.Add(time.Second))
	olderBound := older.DeepCopy()
	olderBound.Spec.NodeName = "a"
	static := pending.DeepCopy()
	static.Spec.NodeName = "static"

	tests := []struct {
		name           string
		old, cur       *corev1.Pod
		startup, bind  uint64
		startupSeconds float64
		bindSumSeconds float64
	}{
		{name: "bound to the node of a NodeClaim made after it", old: pending, cur: bound, bind: 1, bindSumSeconds: 30},
		{name: "running", old: bound, cur: running, startup: 1, startupSeconds: 40},
		{name: "an update that changes neither", old: running, cur: running},
		{name: "bound to a NodeClaim made before it: not nominated to it", old: older, cur: olderBound},
		{name: "bound to a node no NodePool owns", old: pending, cur: static},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			startup, bind := summary(t, metrics.PodsStartupDuration), histogram(t, metrics.AllocationBind)
			p.Observe(context.Background(), tt.old, tt.cur)
			s2, b2 := summary(t, metrics.PodsStartupDuration), histogram(t, metrics.AllocationBind)
			if n := s2.GetSampleCount() - startup.GetSampleCount(); n != tt.startup {
				t.Errorf("%d startup observations, want %d", n, tt.startup)
			} else if n == 1 && s2.GetSampleSum()-startup.GetSampleSum() != tt.startupSeconds {
				t.Errorf("startup %vs, want %vs", s2.GetSampleSum()-startup.GetSampleSum(), tt.startupSeconds)
			}
			if n := b2.GetSampleCount() - bind.GetSampleCount(); n != tt.bind {
				t.Errorf("%d bind observations, want %d", n, tt.bind)
			} else if n == 1 && b2.GetSampleSum()-bind.GetSampleSum() != tt.bindSumSeconds {
				t.Errorf("bind %vs, want %vs", b2.GetSampleSum()-bind.GetSampleSum(), tt.bindSumSeconds)
			}
		})
	}
}

func summary(t *testing.T, m prometheus.Metric) *dto.Summary {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetSummary()
}

func histogram(t *testing.T, m prometheus.Metric) *dto.Histogram {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram()
}

type twoPools struct{ cloudprovider.CloudProvider }

func (twoPools) InstanceTypes(_ context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	m5 := &cloudprovider.InstanceType{Name: "m5.large",
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Offerings: []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: "spot", Price: 0.04, Available: true}, {Zone: "us-east-1b", CapacityType: "spot", Price: 0.035}}}
	if np.Name == "a" {
		return []*cloudprovider.InstanceType{m5}, nil
	}
	return []*cloudprovider.InstanceType{m5, {Name: "c5.large", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}, nil
}

// TestInstanceTypeGauges: every type and offering of every pool, once.
func TestInstanceTypeGauges(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(
		&v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "b"}}).Build()
	got := series(t, &clustermetrics.InstanceTypes{Reader: kube, Provider: twoPools{}})
	want := map[string]float64{
		"karpenter_cloudprovider_instance_type_cpu_cores{instance_type=m5.large}":                                                  2,
		"karpenter_cloudprovider_instance_type_cpu_cores{instance_type=c5.large}":                                                  2,
		"karpenter_cloudprovider_instance_type_memory_bytes{instance_type=m5.large}":                                               8 << 30,
		"karpenter_cloudprovider_instance_type_memory_bytes{instance_type=c5.large}":                                               0,
		"karpenter_cloudprovider_instance_type_offering_available{capacity_type=spot,instance_type=m5.large,zone=us-east-1a}":      1,
		"karpenter_cloudprovider_instance_type_offering_available{capacity_type=spot,instance_type=m5.large,zone=us-east-1b}":      0,
		"karpenter_cloudprovider_instance_type_offering_price_estimate{capacity_type=spot,instance_type=m5.large,zone=us-east-1a}": 0.04,
		"karpenter_cloudprovider_instance_type_offering_price_estimate{capacity_type=spot,instance_type=m5.large,zone=us-east-1b}": 0.035,
	}
	if len(got) != len(want) {
		t.Errorf("%d series, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// pricedProvider lists fixed instance types for every pool.
type pricedProvider struct {
	cloudprovider.CloudProvider
	types []*cloudprovider.InstanceType
}

func (p *pricedProvider) InstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return p.types, nil
}

// billedProvider's bill gives NodeClaims effective prices and
// commitments' use.
type billedProvider struct {
	pricedProvider
	bill cloudprovider.Bill
}

func (p *billedProvider) Bill(context.Context) (cloudprovider.Bill, error) { return p.bill, nil }

// karpenter_nodepools_cost_total (Karpenter v1.14.1's name) sums a pool's
// launched NodeClaims at their effective prices on the bill, NodeOverlays
// included (joiner_nodepools_effective_cost the same, and
// joiner_nodepools_list_cost at list); a pool without NodeClaims reports
// 0, and a NodeClaim not yet launched counts nothing. Each commitment's
// utilisation and each pool's spend cap are series of their own.
func TestNodePoolCost(t *testing.T) {
	claim := func(name, pool, typ, zone, ct string) *v1.NodeClaim {
		labels := map[string]string{v1.LabelNodePool: pool}
		if typ != "" {
			labels[corev1.LabelInstanceTypeStable], labels[corev1.LabelTopologyZone], labels[v1.LabelCapacityType] = typ, zone, ct
		}
		return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	types := []*cloudprovider.InstanceType{{Name: "m5.large", Labels: map[string]string{"karpenter.k8s.aws/instance-family": "m5"}, Offerings: []cloudprovider.Offering{
		{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096, Available: true},
		{Zone: "us-east-1a", CapacityType: "spot", Price: 0.04, Available: true},
	}}}
	half := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "half"}, Spec: v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr("-50%"),
		Requirements: []v1alpha1.NodeSelectorRequirement{{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}}}
	kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(
		&v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: map[string]string{"joiner.sh/hourly-spend-cap": "2.5"}}}, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "idle"}},
		claim("a", "default", "m5.large", "us-east-1a", "on-demand"), claim("b", "default", "m5.large", "us-east-1a", "on-demand"),
		claim("c", "default", "m5.large", "us-east-1a", "spot"), claim("launching", "default", "", "", ""),
	).Build()
	pools := []overlay.Pool{{Name: "default"}, {Name: "idle"}}
	withOverlay := &overlay.Store{}
	applied, _ := overlay.Evaluate([]*v1alpha1.NodeOverlay{half}, pools, map[string][]*cloudprovider.InstanceType{"default": types, "idle": types})
	withOverlay.Set(applied, pools)
	cases := []struct {
		name     string
		provider cloudprovider.CloudProvider
		want     float64
		// wantList is the list cost, wantUse a commitment's utilisation
		// series ("" for none).
		wantList float64
		wantUse  string
	}{
		{"list prices", &pricedProvider{types: types}, 0.096*2 + 0.04, 0.096*2 + 0.04, ""},
		{"on-demand at half price", overlay.Decorate(&pricedProvider{types: types}, withOverlay), 0.048*2 + 0.04, 0.048*2 + 0.04, ""},
		// a under an RI, b under a Savings Plan's rate, c (spot) at list.
		{"under commitments", &billedProvider{pricedProvider: pricedProvider{types: types}, bill: cloudprovider.Bill{
			Effective:   map[string]float64{"a": 0, "b": 0.0672},
			Commitments: []cloudprovider.CommitmentUse{{ID: "ri-1", Kind: "reserved-instance", Used: 4, Total: 8}}}},
			0.0672 + 0.04, 0.096*2 + 0.04, "joiner_commitments_utilization{commitment=ri-1,kind=reserved-instance} 0.5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := series(t, &clustermetrics.State{Reader: kube, Cluster: &state.Cluster{Client: kube}, Provider: tc.provider})
			if v := got["karpenter_nodepools_cost_total{nodepool=default}"]; v < tc.want-1e-9 || v > tc.want+1e-9 {
				t.Errorf("default costs $%v, want $%v", v, tc.want)
			}
			if v, ok := got["karpenter_nodepools_cost_total{nodepool=idle}"]; !ok || v != 0 {
				t.Errorf("idle costs $%v (reported %v), want $0", v, ok)
			}
			if v := got["joiner_nodepools_effective_cost{nodepool=default}"]; v < tc.want-1e-9 || v > tc.want+1e-9 {
				t.Errorf("default's effective cost $%v, want $%v", v, tc.want)
			}
			if v := got["joiner_nodepools_list_cost{nodepool=default}"]; v < tc.wantList-1e-9 || v > tc.wantList+1e-9 {
				t.Errorf("default's list cost $%v, want $%v", v, tc.wantList)
			}
			if v, ok := got["joiner_nodepools_spend_cap{nodepool=default}"]; v != 2.5 {
				t.Errorf("default's spend cap %v (reported %v), want 2.5", v, ok)
			}
			if _, ok := got["joiner_nodepools_spend_cap{nodepool=idle}"]; ok {
				t.Error("idle has no spend cap, yet a series")
			}
			uses := 0
			for k, v := range got {
				if strings.HasPrefix(k, "joiner_commitments_utilization") {
					uses++
					if fmt.Sprintf("%s %v", k, v) != tc.wantUse {
						t.Errorf("utilisation %s %v, want %q", k, v, tc.wantUse)
					}
				}
			}
			if want := len(strings.Fields(tc.wantUse)) / 2; uses != want {
				t.Errorf("%d utilisation series, want %d", uses, want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
