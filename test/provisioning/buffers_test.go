package provisioning

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
)

// bufferState is a buffer's status as "replicas ready/reason provisioning/reason".
func bufferState(t *testing.T, name string) string {
	t.Helper()
	var b v1beta1.CapacityBuffer
	if err := framework.Kube.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, &b); err != nil {
		return err.Error()
	}
	cond := func(ty string) string {
		if c := meta.FindStatusCondition(b.Status.Conditions, ty); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return "none"
	}
	replicas := int32(-1)
	if b.Status.Replicas != nil {
		replicas = *b.Status.Replicas
	}
	return fmt.Sprintf("%d %s %s", replicas, cond("ReadyForProvisioning"), cond("Provisioning"))
}

// TestCapacityBuffer is the CapacityBuffer gate as a user meets it: a
// buffer of two 1-CPU pods keeps room for them on nodes launched for no
// real pod; consolidation keeps those nodes; a real pod takes the room and
// the buffer refills; a buffer whose workload is missing says so.
func TestCapacityBuffer(t *testing.T) {
	framework.StartJoiner(t, "FEATURE_GATES=CapacityBuffer=true")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolWith("0s", "720h"), "apply", "-f", "-")
	framework.Kubectl(t, `apiVersion: v1
kind: PodTemplate
metadata: {name: buffer-unit, namespace: default}
template:
  metadata: {labels: {app: buffer-unit}}
  spec:
    containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: headroom, namespace: default}
spec:
  podTemplateRef: {name: buffer-unit}
  replicas: 2
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: orphan, namespace: default}
spec:
  scalableRef: {kind: Deployment, name: not-there}
  percentage: 50
`, "apply", "-f", "-")
	framework.Eventually(t, 2*time.Minute, "the buffer resolved and its room launched", func() (bool, string) {
		s := bufferState(t, "headroom")
		return s == "2 True/Resolved True/FitsExistingCapacity", s
	})
	if s := bufferState(t, "orphan"); s != "-1 False/ScalableRefNotFound False/NotReadyForProvisioning" {
		t.Errorf("the orphan buffer: %s", s)
	}
	claims := framework.Initialized(t, len(framework.NodeClaims(t)))
	cpu := int64(0)
	for _, nc := range claims {
		cpu += nc.Spec.Resources.Requests.Cpu().MilliValue()
	}
	if len(claims) == 0 || cpu < 2000 {
		t.Fatalf("%d nodeclaims requesting %dm cpu, want room for the buffer's 2000m", len(claims), cpu)
	}
	// consolidateAfter 0s: the nodes are empty of real pods, yet the
	// buffer's pending pods hold them. The disruption loop says why.
	framework.WaitForEvent(t, time.Minute, "DisruptionBlocked", claims[0].Name, "")
	if n := len(framework.NodeClaims(t)); n != len(claims) {
		t.Fatalf("%d nodeclaims after consolidation looked, want the buffer's %d", n, len(claims))
	}

	// Real pods of the same shape take the room; the buffer refills: a
	// node more, and its pods fit again.
	framework.Kubectl(t, framework.Deployment("consumer", 2, "1", "1Gi", ""), "apply", "-f", "-")
	framework.Eventually(t, 2*time.Minute, "the consumers Running and the buffer refilled", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "consumer"})
		now := len(framework.NodeClaims(t))
		s := bufferState(t, "headroom")
		return n == 2 && now > len(claims) && s == "2 True/Resolved True/FitsExistingCapacity", fmt.Sprintf("%d running, %d nodeclaims (was %d), %s", n, now, len(claims), s)
	})
}
