package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestDiscoveredCapacity: the fake's nodes report their type's whole
// memory, more than the estimate (VM_MEMORY_OVERHEAD_PERCENT's 7.5% less).
// Once an m5.large has registered, a pod that fits in what the node
// reports, but not in the estimate, gets an m5.large rather than an
// m5.xlarge: the type's memory was learned from the node (Karpenter's
// discovered capacity).
func TestDiscoveredCapacity(t *testing.T) {
	framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifests := strings.Replace(framework.PoolAndClass, "      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n",
		"      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}\n", 1)
	framework.Kubectl(t, manifests, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("first", 1, "500m", "512Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the first pod running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "first"})
		return n == 1, fmt.Sprintf("%d running", n)
	})
	claims := framework.NodeClaims(t)
	if len(claims) != 1 || claims[0].Labels[corev1.LabelInstanceTypeStable] != "m5.large" {
		t.Fatalf("want one m5.large NodeClaim, got %d: %v", len(claims), claims)
	}
	var node corev1.Node
	if err := framework.Kube.Get(context.Background(), client.ObjectKey{Name: claims[0].Status.NodeName}, &node); err != nil {
		t.Fatal(err)
	}
	estimate, reported := claims[0].Status.Allocatable[corev1.ResourceMemory], node.Status.Allocatable[corev1.ResourceMemory]
	if reported.Cmp(estimate) <= 0 {
		t.Fatalf("the node reports %s allocatable, no more than the estimate %s: nothing to learn", reported.String(), estimate.String())
	}
	// Halfway between the estimate and what the node reports.
	between := resource.NewQuantity((estimate.Value()+reported.Value())/2, resource.BinarySI)
	framework.Kubectl(t, framework.Deployment("big", 1, "500m", between.String(), ""), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the big pod running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "big"})
		return n == 1, fmt.Sprintf("%d running", n)
	})
	for _, nc := range framework.NodeClaims(t) {
		if nc.Name == claims[0].Name {
			continue
		}
		if typ := nc.Labels[corev1.LabelInstanceTypeStable]; typ != "m5.large" {
			t.Fatalf("a pod of %s memory (estimate %s, reported %s) got an %s, want an m5.large", between.String(), estimate.String(), reported.String(), typ)
		}
	}
}
