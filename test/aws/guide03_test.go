package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/catalog"
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
	explainBoots(t)
	j := framework.StartJoiner(t, awsEnv()...)
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
	assertOverrides(t, fleets[0].Params)
	node := &corev1.Node{}
	if err := framework.Kube.Get(ctx, types.NamespacedName{Name: first.Status.NodeName}, node); err != nil {
		t.Fatalf("the NodeClaim's node: %v", err)
	}
	if node.Spec.ProviderID != first.Status.ProviderID || node.Labels[v1.LabelNodePool] != "default" {
		t.Fatalf("node %s: provider ID %q labels %v", node.Name, node.Spec.ProviderID, node.Labels)
	}
	firstPrice := onDemandPrice(t, first.Labels[corev1.LabelInstanceTypeStable])

	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "1")
	var second v1.NodeClaim
	framework.Eventually(t, 4*time.Minute, "a cheaper instance replaces the first", func() (bool, string) {
		claims := framework.NodeClaims(t)
		if len(claims) != 1 || claims[0].Name == first.Name {
			return false, fmt.Sprintf("%d NodeClaims", len(claims))
		}
		second = claims[0]
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 1 && framework.Condition(second, "Initialized") == "True", fmt.Sprintf("%d running, %s", n, second.Name)
	})
	if p := onDemandPrice(t, second.Labels[corev1.LabelInstanceTypeStable]); p >= firstPrice {
		t.Fatalf("replacement %s costs $%.4f/h, not less than %s's $%.4f/h", second.Labels[corev1.LabelInstanceTypeStable], p, first.Labels[corev1.LabelInstanceTypeStable], firstPrice)
	}
	if j.Count("disrupting nodeclaim(s) via replace") == 0 {
		t.Fatalf("no replace decision logged")
	}
	firstID := first.Status.ProviderID[strings.LastIndex(first.Status.ProviderID, "/")+1:]
	framework.Eventually(t, 2*time.Minute, "the first instance ends terminated", func() (bool, string) {
		state := instances(t)[firstID]
		return state == "terminated", state
	})
	// No running instance is left without a NodeClaim.
	owned := map[string]bool{}
	for _, c := range framework.NodeClaims(t) {
		owned[c.Status.ProviderID[strings.LastIndex(c.Status.ProviderID, "/")+1:]] = true
	}
	for id, state := range instances(t) {
		if state != "terminated" && state != "shutting-down" && !owned[id] {
			t.Errorf("instance %s is %s without a NodeClaim", id, state)
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

// assertOverrides checks the fleet request had at most 60 overrides, in
// price order, as the call log recorded them.
func assertOverrides(t testing.TB, params map[string]any) {
	t.Helper()
	raw, ok := params["overrides"].([]any)
	if !ok {
		t.Fatalf("the call log has no overrides for CreateFleet: %v", params)
	}
	if len(raw) == 0 || len(raw) > 60 {
		t.Fatalf("%d overrides, want 1 to 60", len(raw))
	}
	prices, err := catalog.OnDemandPrices(region)
	if err != nil {
		t.Fatal(err)
	}
	last := 0.0
	for i, o := range raw {
		m, _ := o.(map[string]any)
		it, _ := m["instanceType"].(string)
		p := prices[it]
		if p < last {
			t.Fatalf("override %d (%s, $%.4f) is cheaper than the one before ($%.4f): not in price order", i, it, p, last)
		}
		last = p
	}
}
