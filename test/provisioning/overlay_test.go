package provisioning

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
)

// overlayCondition is a NodeOverlay's condition as "status/reason".
func overlayCondition(t *testing.T, name, cond string) string {
	t.Helper()
	var o v1alpha1.NodeOverlay
	if err := framework.Kube.Get(context.Background(), types.NamespacedName{Name: name}, &o); err != nil {
		return err.Error()
	}
	c := meta.FindStatusCondition(o.Status.Conditions, cond)
	if c == nil {
		return "none"
	}
	return string(c.Status) + "/" + c.Reason
}

// TestNodeOverlays runs the NodeOverlay gate end to end on kwok: a price
// overlay changes the type launched, and the NodeClaim says an overlay
// priced it; an overlay of the same weight conflicts and says so in its
// status; a capacity overlay gives nodes an extended resource that a pod
// requests, and kube-scheduler runs the pod on such a node.
func TestNodeOverlays(t *testing.T) {
	framework.StartJoiner(t, "FEATURE_GATES=NodeOverlay=true")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")
	framework.Kubectl(t, `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: m5-half}
spec:
  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]
  priceAdjustment: "-50%"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: m5-free}
spec:
  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]
  price: "0"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: devices}
spec:
  weight: 10
  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [r6i]}]
  capacity: {example.com/device: "2"}
`, "apply", "-f", "-")
	framework.Eventually(t, time.Minute, "the overlays judged", func() (bool, string) {
		got := fmt.Sprintf("%s %s %s", overlayCondition(t, "m5-half", "Ready"), overlayCondition(t, "m5-free", "ValidationSucceeded"), overlayCondition(t, "devices", "Ready"))
		return got == "True/Ready False/Conflict True/Ready", got
	})
	// The guide's inflate shape: at list prices a c6a.2xlarge (test
	// TestGuideScaleUp); with m5 at half price, an m5.
	framework.Kubectl(t, framework.Deployment("inflate", 5, "1", "1.5Gi", ""), "apply", "-f", "-")
	framework.Eventually(t, 2*time.Minute, "5 inflate pods Running", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 5, fmt.Sprintf("%d running on %v", n, nodes)
	})
	claims := framework.NodeClaims(t)
	if len(claims) != 1 {
		t.Fatalf("%d nodeclaims, want 1", len(claims))
	}
	nc := claims[0]
	if it := nc.Labels["node.kubernetes.io/instance-type"]; !strings.HasPrefix(it, "m5.") {
		t.Errorf("launched %s, want an m5 (half price under m5-half)", it)
	}
	if nc.Annotations[v1.AnnotationPriceOverlayApplied] != "true" {
		t.Errorf("nodeclaim annotations %v lack %s", nc.Annotations, v1.AnnotationPriceOverlayApplied)
	}
	// A device only the overlaid r6i types offer: the pod runs where the
	// overlay said it could.
	framework.Kubectl(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: devices}
spec:
  replicas: 1
  selector: {matchLabels: {app: devices}}
  template:
    metadata: {labels: {app: devices}}
    spec:
      containers:
      - name: c
        image: registry.k8s.io/pause:3.9
        resources: {requests: {cpu: 500m, memory: 512Mi, example.com/device: "1"}, limits: {example.com/device: "1"}}
`, "apply", "-f", "-")
	var on map[string]int
	framework.Eventually(t, 2*time.Minute, "the devices pod Running", func() (bool, string) {
		var n int
		n, on = framework.Running(t, map[string]string{"app": "devices"})
		return n == 1, fmt.Sprintf("%d running on %v", n, on)
	})
	if len(framework.NodeClaims(t)) != 2 {
		t.Fatalf("%d nodeclaims, want 2: the m5 and one for the device", len(framework.NodeClaims(t)))
	}
	for _, c := range framework.NodeClaims(t) {
		if c.Name == nc.Name {
			continue
		}
		if it := c.Labels["node.kubernetes.io/instance-type"]; !strings.HasPrefix(it, "r6i.") || c.Annotations[v1.AnnotationCapacityOverlayApplied] != "true" {
			t.Errorf("the device pod's nodeclaim is a %s with annotations %v, want an r6i marked capacity-overlay-applied", it, c.Annotations)
		}
		if q := c.Status.Allocatable["example.com/device"]; q.Value() != 2 {
			t.Errorf("nodeclaim allocatable example.com/device = %s, want 2", q.String())
		}
		if on[c.Status.NodeName] != 1 {
			t.Errorf("the devices pod runs on %v, not on %s", on, c.Status.NodeName)
		}
	}
}
