package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
)

// TestGuide03UpAndDown is the installation guide's walkthrough on AWS: the
// EC2NodeClass resolves, five pods bring up one instance through one fleet
// call, its Node registers from the user data, and scaled to one pod the
// instance is replaced by a cheaper one and terminated.
func TestGuide03UpAndDown(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	port := framework.FreePort(t)
	j := framework.StartJoiner(t, awsEnv(fmt.Sprintf("METRICS_PORT=%d", port))...)
	// Before Joiner stops: its finalizers must run for the cluster to empty.
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifest := strings.Replace(framework.ReadSeed(t, "03-scale-up-down.yaml"), "consolidateAfter: 1m", "consolidateAfter: 5s", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	ctx := context.Background()

	framework.Eventually(t, 2*time.Minute, "the EC2NodeClass is Ready", func() (bool, string) {
		nc := &awsv1.EC2NodeClass{}
		if err := framework.Kube.Get(ctx, types.NamespacedName{Name: "default"}, nc); err != nil {
			return false, err.Error()
		}
		arches := map[string]bool{}
		for _, ami := range nc.Status.AMIs {
			for _, r := range ami.Requirements {
				if r.Key == corev1.LabelArchStable && r.Operator == corev1.NodeSelectorOpIn {
					for _, v := range r.Values {
						arches[v] = true
					}
				}
			}
		}
		ok := meta.IsStatusConditionTrue(nc.Status.Conditions, "Ready") && len(nc.Status.Subnets) == 3 &&
			len(nc.Status.SecurityGroups) == 1 && arches["amd64"] && arches["arm64"] && nc.Status.InstanceProfile != ""
		return ok, fmt.Sprintf("conditions %v subnets %d security groups %d arches %v profile %q",
			nc.Status.Conditions, len(nc.Status.Subnets), len(nc.Status.SecurityGroups), arches, nc.Status.InstanceProfile)
	})

	framework.Eventually(t, 3*time.Minute, "five inflate pods run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 5, fmt.Sprintf("%d running", n)
	})
	claims := framework.NodeClaims(t)
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims for five pods, want 1", len(claims))
	}
	first := claims[0]
	if !strings.HasPrefix(first.Status.ProviderID, "aws:///"+first.Labels[corev1.LabelTopologyZone]+"/i-") {
		t.Fatalf("provider ID %q", first.Status.ProviderID)
	}
	fleets := fake.Calls("ec2", "CreateFleet")
	if len(fleets) != 1 {
		t.Fatalf("%d CreateFleet calls for one NodeClaim, want 1", len(fleets))
	}
	assertOverrides(t, fleets[0].Params, first.Labels[corev1.LabelInstanceTypeStable])
	node := &corev1.Node{}
	if err := framework.Kube.Get(ctx, types.NamespacedName{Name: first.Status.NodeName}, node); err != nil {
		t.Fatalf("the NodeClaim's node: %v", err)
	}
	if node.Spec.ProviderID != first.Status.ProviderID || node.Labels[v1.LabelNodePool] != "default" {
		t.Fatalf("node %s: provider ID %q labels %v", node.Name, node.Spec.ProviderID, node.Labels)
	}
	firstPrice := onDemandPrice(t, first.Labels[corev1.LabelInstanceTypeStable])
	// The instance runs with its class's security groups, so nothing is
	// drifted: the replacement below is consolidation's, not drift's.
	nc := &awsv1.EC2NodeClass{}
	if err := framework.Kube.Get(ctx, types.NamespacedName{Name: "default"}, nc); err != nil {
		t.Fatal(err)
	}
	firstID := instanceID(first.Status.ProviderID)
	if got, want := securityGroups(t, firstID), nc.Status.SecurityGroups; len(got) != len(want) || got[0] != want[0].ID {
		t.Fatalf("instance %s has security groups %v, its class %v", firstID, got, want)
	}

	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "1")
	var second v1.NodeClaim
	framework.Eventually(t, 4*time.Minute, "a cheaper instance replaces the first", func() (bool, string) {
		claims := framework.NodeClaims(t)
		if len(claims) != 1 || claims[0].Name == first.Name {
			return false, fmt.Sprintf("%d NodeClaims", len(claims))
		}
		second = claims[0]
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 1 && meta.IsStatusConditionTrue(second.Status.Conditions, v1.ConditionTypeInitialized), fmt.Sprintf("%d running, %s %s", n, second.Name, framework.Condition(second, v1.ConditionTypeInitialized))
	})
	if p := onDemandPrice(t, second.Labels[corev1.LabelInstanceTypeStable]); p >= firstPrice {
		t.Fatalf("replacement %s costs $%.4f/h, not less than %s's $%.4f/h", second.Labels[corev1.LabelInstanceTypeStable], p, first.Labels[corev1.LabelInstanceTypeStable], firstPrice)
	}
	if !j.Decided(first.Name, first.Status.NodeName) {
		t.Fatalf("no replace decision logged")
	}
	for _, line := range strings.Split(j.Logs(), "\n") {
		if strings.Contains(line, `"message":"disrupting nodeclaim(s)`) && !strings.Contains(line, `"reason":"underutilized"`) {
			t.Fatalf("a disruption other than consolidation: %s", line)
		}
	}
	framework.Eventually(t, 2*time.Minute, "the first instance ends terminated", func() (bool, string) {
		state := instances(t)[firstID]
		return state == "terminated", state
	})
	// No running instance is left without a NodeClaim.
	for _, stray := range strayInstances(t) {
		t.Errorf("instance %s without a NodeClaim", stray)
	}

	// Karpenter's dashboards draw from what this walk-through did.
	families := checkDashboardMetrics(t, port)
	for _, name := range []string{"karpenter_cloudprovider_duration_seconds", "karpenter_cloudprovider_instance_type_cpu_cores", "karpenter_cloudprovider_instance_type_memory_bytes",
		"karpenter_cloudprovider_instance_type_offering_available", "karpenter_cloudprovider_instance_type_offering_price_estimate",
		"karpenter_cloudprovider_batcher_batch_time_seconds", "karpenter_cloudprovider_batcher_batch_size",
		"karpenter_nodepools_cost_total", "karpenter_ec2nodeclasses_userdata_bytes"} {
		if f := families[name]; f == nil || len(f.Metric) == 0 {
			t.Errorf("/metrics does not serve %s", name)
		}
	}
	for _, want := range []struct {
		family string
		labels map[string]string
		min    float64
	}{
		{"karpenter_nodes_created_total", map[string]string{"nodepool": "default"}, 2},
		{"karpenter_nodes_terminated_total", map[string]string{"nodepool": "default"}, 1},
		{"karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": "default", "reason": "underutilized", "capacity_type": "on-demand"}, 1},
		{"karpenter_voluntary_disruption_decisions_total", map[string]string{"decision": "replace", "reason": "underutilized", "consolidation_type": "single"}, 1},
		{"karpenter_nodes_allocatable", map[string]string{"nodepool": "default", "resource_type": "cpu", "node_name": second.Status.NodeName,
			"instance_type": second.Labels[corev1.LabelInstanceTypeStable], "capacity_type": "on-demand"}, 1},
		{"karpenter_nodepools_limit", map[string]string{"nodepool": "default", "resource_type": "cpu"}, 1000},
		// The c6a.large left after the scale-down, at the Price List's price.
		{"karpenter_nodepools_cost_total", map[string]string{"nodepool": "default"}, 0.0765},
		{"karpenter_ec2nodeclasses_userdata_bytes", map[string]string{"nodeclass": "default"}, 100},
		{"karpenter_pods_state", map[string]string{"node": second.Status.NodeName, "phase": "Running", "nodepool": "default"}, 1},
	} {
		if got := sumOf(families[want.family], want.labels); got < want.min {
			t.Errorf("%s%v = %v, want at least %v", want.family, want.labels, got, want.min)
		}
	}
}

func onDemandPrice(t testing.TB, instanceType string) float64 {
	prices, err := catalog.OnDemandPrices(region)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := prices[instanceType]
	if !ok {
		t.Fatalf("no catalog price for %s", instanceType)
	}
	return p
}

// assertOverrides checks the fleet request had at most 60 overrides and
// launched the cheapest of their types (the call log lists the types; the
// price order of the request itself is a unit test of package instance).
func assertOverrides(t testing.TB, params map[string]any, launched string) {
	t.Helper()
	// The call log's JSON form, as a reader of its file sees it.
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	var logged struct {
		Overrides     *int     `json:"overrides"`
		InstanceTypes []string `json:"instanceTypes"`
	}
	if err := json.Unmarshal(b, &logged); err != nil {
		t.Fatal(err)
	}
	if logged.Overrides == nil {
		t.Fatalf("the call log has no override count for CreateFleet: %v", params)
	}
	if n := *logged.Overrides; n < 1 || n > 60 {
		t.Fatalf("%d overrides, want 1 to 60", n)
	}
	prices, err := catalog.OnDemandPrices(region)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range logged.InstanceTypes {
		if prices[name] < prices[launched] {
			t.Fatalf("launched %s ($%.4f/h) although the request offered %s ($%.4f/h)", launched, prices[launched], name, prices[name])
		}
	}
}
