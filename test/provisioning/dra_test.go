package provisioning

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestResourceClaimsAreLeftAlone is issue 36's DRA acceptance: a pod that
// claims DRA devices gets no NodeClaim and an event naming the reason, in
// Karpenter's words, while a pod without claims, pending at the same time,
// gets its node. The claim comes from a template, so kube-controller-manager
// creates it and kube-scheduler finds no device for it: the pod is pending
// as a real one would be.
func TestResourceClaimsAreLeftAlone(t *testing.T) {
	j := framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	t.Cleanup(func() {
		framework.Kubectl(t, "", "delete", "pod", "claims", "--ignore-not-found", "--wait=false")
		framework.Kubectl(t, "", "delete", "resourceclaimtemplate", "gpu", "--ignore-not-found")
		framework.Kubectl(t, "", "delete", "deviceclass", "gpu.example.com", "--ignore-not-found")
	})
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")
	framework.Kubectl(t, `apiVersion: resource.k8s.io/v1beta1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: gpu, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, deviceClassName: gpu.example.com}]
---
apiVersion: v1
kind: Pod
metadata: {name: claims, namespace: default, labels: {app: claims}}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
  containers:
  - name: c
    image: registry.k8s.io/pause:3.9
    resources: {requests: {cpu: "1", memory: 1Gi}, claims: [{name: gpu}]}
---
`+framework.Deployment("plain", 1, "1", "1Gi", ""), "apply", "-f", "-")
	msg := framework.WaitForEvent(t, 2*time.Minute, "FailedScheduling", "claims", "Failed to schedule pod, pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter")
	t.Logf("event: %s", msg)
	framework.Eventually(t, 2*time.Minute, "the plain pod Running", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "plain"})
		return n == 1, fmt.Sprintf("%d running on %v", n, nodes)
	})
	// One more whole batch with the claiming pod still pending: it must
	// not have won a node in any batch.
	j.WaitForBatches(t, 1)
	framework.WantClaims(t, 1)
	for _, nc := range framework.NodeClaims(t) {
		if cpu := nc.Spec.Resources.Requests.Cpu().MilliValue(); cpu != 1000 {
			t.Errorf("nodeclaim %s requests %dm cpu, want 1000m: the plain pod's alone", nc.Name, cpu)
		}
	}
	if !strings.Contains(j.Logs(), `"message":"skipping pod with Dynamic Resource Allocation requirements, not yet supported by Karpenter"`) {
		t.Errorf("the log lacks Karpenter's line for a skipped DRA pod")
	}
}
