package provisioning

import (
	"fmt"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestDaemonSetOnTheOSLabel is issue 9's reproduction: node agents
// (aws-node, kube-proxy, ebs-csi-node) select kubernetes.io/os=linux, which
// the NodePool does not list; their requests must still be in the
// NodeClaim, and the agent must fit next to the pods it was sized for.
func TestDaemonSetOnTheOSLabel(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")
	framework.Kubectl(t, `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-agent}
spec:
  selector: {matchLabels: {app: node-agent}}
  template:
    metadata: {labels: {app: node-agent}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 700m, memory: 300Mi}}}]
---
`+framework.Deployment("linux-ds", 2, "1", "1Gi", ""), "apply", "-f", "-")
	framework.Eventually(t, 2*time.Minute, "2 linux-ds pods and the agent Running", func() (bool, string) {
		pods, _ := framework.Running(t, map[string]string{"app": "linux-ds"})
		agents, nodes := framework.Running(t, map[string]string{"app": "node-agent"})
		return pods == 2 && agents == len(framework.NodeClaims(t)), fmt.Sprintf("%d pods, agents on %v", pods, nodes)
	})
	for _, nc := range framework.NodeClaims(t) {
		if cpu := nc.Spec.Resources.Requests.Cpu().MilliValue(); cpu != 2700 {
			t.Errorf("nodeclaim %s requests %dm cpu, want 2700m (2 pods and the DaemonSet)", nc.Name, cpu)
		}
	}
}

// TestAffinityByNamespaceSelectorInOneBatch: web pods require zone
// affinity to db pods of another namespace, chosen by the namespace's
// labels, and both Deployments are pending together. Joiner must read the
// Namespace's labels and plan the web pods after the db pods they follow;
// kube-scheduler running them proves the affinity holds.
func TestAffinityByNamespaceSelectorInOneBatch(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	t.Cleanup(func() { framework.Kubectl(t, "", "delete", "namespace", "data", "--ignore-not-found", "--timeout=90s") })
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")
	framework.Kubectl(t, `apiVersion: v1
kind: Namespace
metadata: {name: data, labels: {team: data}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: db, namespace: data}
spec:
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
---
`+framework.Deployment("web", 3, "2", "1Gi", `      affinity:
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - topologyKey: topology.kubernetes.io/zone
            labelSelector: {matchLabels: {app: db}}
            namespaceSelector: {matchLabels: {team: data}}
`), "apply", "-f", "-")
	// kube-scheduler may park a pod its pod-affinity filter rejected (no db
	// pod was bound yet) until its unschedulable queue is flushed, after
	// 5 minutes at most; the wait covers that.
	framework.Eventually(t, 6*time.Minute, "3 web pods Running", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "web"})
		return n == 3, fmt.Sprintf("%d running on %v", n, nodes)
	})
}

// TestDaemonSetUnderALimitRange is the regression suite's "LimitRange
// Default on daemonSet pods" as Joiner first failed it: the namespace's
// LimitRange gives every container 2 CPUs, the DaemonSet's template asks
// nothing, and a node planned for the Deployment's pod alone had no room
// for both, so each new node took the DaemonSet's pod and left the other
// pending, and another node was launched, for ever. The DaemonSet's pods
// must be counted as admitted: one node runs both.
func TestDaemonSetUnderALimitRange(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	t.Cleanup(func() { framework.Kubectl(t, "", "delete", "limitrange", "defaults", "--ignore-not-found") })
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")
	framework.Kubectl(t, `apiVersion: v1
kind: LimitRange
metadata: {name: defaults, namespace: default}
spec:
  limits:
  - type: Container
    default: {cpu: "2", memory: 1Gi}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.9}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  replicas: 1
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.9}]
`, "apply", "-f", "-")
	framework.Eventually(t, 2*time.Minute, "the app and the agent Running on one node", func() (bool, string) {
		apps, onApp := framework.Running(t, map[string]string{"app": "app"})
		agents, _ := framework.Running(t, map[string]string{"app": "agent"})
		return apps == 1 && agents >= 1, fmt.Sprintf("app on %v, %d agents", onApp, agents)
	})
	framework.WantClaims(t, 1)
	if cpu := framework.NodeClaims(t)[0].Spec.Resources.Requests.Cpu().MilliValue(); cpu != 4000 {
		t.Errorf("the nodeclaim requests %dm cpu, want 4000m: the app's 2 and the agent's 2 from the LimitRange", cpu)
	}
}
