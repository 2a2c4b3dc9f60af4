package provisioning

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestConstraintsEndToEnd runs each constraint, and its counter-case, through
// the controller, kube-scheduler and kwok. The NodeClaims are counted once
// the pods run, or, for pods that must stay pending, once the provisioner's
// FailedScheduling event says it planned them and found no room.
func TestConstraintsEndToEnd(t *testing.T) {
	port := framework.FreePort(t)
	framework.StartJoiner(t, fmt.Sprintf("METRICS_PORT=%d", port))
	cases := []struct {
		name  string
		setup string
		// pods is how many app=<name> pods must end Running (0: none may).
		app  string
		pods int
		// anyPool drops the pool's on-demand, c/m/r and amd64 requirements;
		// taint adds dedicated=infra:NoSchedule to it.
		anyPool, taint bool
		check          func(t *testing.T)
	}{
		{name: "nodeSelector picks arm64 types", app: "arm", pods: 1, anyPool: true,
			setup: framework.Deployment("arm", 1, "250m", "256Mi", "      nodeSelector: {kubernetes.io/arch: arm64}\n"),
			check: func(t *testing.T) {
				for _, nc := range framework.NodeClaims(t) {
					if nc.Labels["kubernetes.io/arch"] != "arm64" {
						t.Fatalf("nodeclaim %s is %s", nc.Name, nc.Labels["kubernetes.io/arch"])
					}
				}
			}},
		{name: "nodeSelector on a label no NodePool offers", app: "team", pods: 0,
			setup: framework.Deployment("team", 1, "250m", "256Mi", "      nodeSelector: {team: payments}\n"),
			check: func(t *testing.T) {
				framework.WaitEvent(t, `label "team" is not offered`)
				framework.WantClaims(t, 0)
			}},
		{name: "required node affinity terms are ORed", app: "ored", pods: 1,
			setup: framework.Deployment("ored", 1, "250m", "256Mi", `      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [eu-west-1a]}]
            - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1c]}]
`), check: func(t *testing.T) {
				for _, nc := range framework.NodeClaims(t) {
					if z := nc.Labels["topology.kubernetes.io/zone"]; z != "us-east-1c" {
						t.Fatalf("zone %s", z)
					}
				}
			}},
		{name: "a taint the pods do not tolerate", app: "untolerated", pods: 0,
			setup: framework.Deployment("untolerated", 1, "250m", "256Mi", ""),
			taint: true,
			check: func(t *testing.T) {
				framework.WaitEvent(t, `did not tolerate taint dedicated=infra:NoSchedule`)
				framework.WantClaims(t, 0)
			}},
		{name: "the same taint tolerated", app: "tolerated", pods: 1, taint: true,
			setup: framework.Deployment("tolerated", 1, "250m", "256Mi", "      tolerations: [{key: dedicated, value: infra, effect: NoSchedule}]\n"),
			check: func(t *testing.T) { framework.WantClaims(t, 1) }},
		{name: "host ports keep pods apart", app: "ports", pods: 2,
			setup: strings.Replace(framework.Deployment("ports", 2, "250m", "256Mi", ""), "resources:", "ports: [{containerPort: 8080, hostPort: 8080}], resources:", 1),
			check: func(t *testing.T) { framework.WantClaims(t, 2) }},
		{name: "a GPU request gets a GPU node", app: "gpu", pods: 1, anyPool: true,
			setup: strings.Replace(framework.Deployment("gpu", 1, "1", "1Gi", ""), "memory: 1Gi}", "memory: 1Gi, nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}", 1),
			check: func(t *testing.T) {
				for _, nc := range framework.NodeClaims(t) {
					if nc.Labels["karpenter.k8s.aws/instance-gpu-count"] == "" {
						t.Fatalf("nodeclaim %s (%s) has no GPU", nc.Name, nc.Labels["node.kubernetes.io/instance-type"])
					}
				}
			}},
		{name: "pod affinity follows its target's zone", app: "follower", pods: 1,
			setup: framework.Deployment("leader", 1, "250m", "256Mi", "      nodeSelector: {topology.kubernetes.io/zone: us-east-1b}\n") + "---\n" +
				framework.Deployment("follower", 1, "250m", "256Mi", `      affinity:
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: leader}}}
`), check: func(t *testing.T) {
				for _, nc := range framework.NodeClaims(t) {
					if z := nc.Labels["topology.kubernetes.io/zone"]; z != "us-east-1b" {
						t.Fatalf("zone %s", z)
					}
				}
			}},
		{name: "capacity-type spread uses spot and on-demand", app: "mixed", pods: 2, anyPool: true,
			setup: framework.Deployment("mixed", 2, "250m", "256Mi", `      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: karpenter.sh/capacity-type, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: mixed}}}
`), check: func(t *testing.T) {
				cts := map[string]bool{}
				for _, nc := range framework.NodeClaims(t) {
					cts[nc.Labels["karpenter.sh/capacity-type"]] = true
				}
				if !cts["spot"] || !cts["on-demand"] {
					t.Fatalf("capacity types %v", cts)
				}
			}},

		{name: "hostname anti-affinity gives each pod a node", app: "anti", pods: 3,
			setup: framework.Deployment("anti", 3, "250m", "256Mi", `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: anti}}}
`), check: func(t *testing.T) { framework.WantClaims(t, 3) }},
		{name: "without anti-affinity the pods share a node", app: "together", pods: 3,
			setup: framework.Deployment("together", 3, "250m", "256Mi", ""), check: func(t *testing.T) { framework.WantClaims(t, 1) }},
		{name: "zone spread uses every zone", app: "zonal", pods: 3,
			setup: framework.Deployment("zonal", 3, "250m", "256Mi", `      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: zonal}}}
`), check: func(t *testing.T) {
				zones := map[string]bool{}
				for _, nc := range framework.NodeClaims(t) {
					zones[nc.Labels["topology.kubernetes.io/zone"]] = true
				}
				if len(zones) != 3 {
					t.Fatalf("zones %v", zones)
				}
			}},
		{name: "a DaemonSet's requests are on every new node", app: "with-ds", pods: 2,
			setup: `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 700m, memory: 300Mi}}}]
---
` + framework.Deployment("with-ds", 2, "1", "1Gi", ""), check: func(t *testing.T) {
				for _, nc := range framework.NodeClaims(t) {
					if cpu := nc.Spec.Resources.Requests.Cpu().MilliValue(); cpu != 2700 {
						t.Errorf("nodeclaim %s requests %dm cpu, want 2700m (2 pods and the DaemonSet)", nc.Name, cpu)
					}
				}
				framework.Eventually(t, time.Minute, "the DaemonSet pod Running on the new node", func() (bool, string) {
					n, nodes := framework.Running(t, map[string]string{"app": "agent"})
					return n == len(framework.NodeClaims(t)), fmt.Sprintf("%d on %v", n, nodes)
				})
			}},
		{name: "a pod no NodePool can take gets no NodeClaim and a reason per NodePool", app: "huge", pods: 0,
			setup: strings.Replace(strings.SplitN(framework.PoolAndClass, "---", 2)[1], "name: default}", "name: second}", 1) + "---\n" + framework.Deployment("huge", 1, "500", "1Gi", ""),
			check: func(t *testing.T) {
				framework.Eventually(t, time.Minute, "a FailedScheduling event naming both NodePools", func() (bool, string) {
					out := framework.Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=FailedScheduling", "-o", "custom-columns=MSG:.message")
					return strings.Contains(out, `nodepool "default": no instance type has room`) && strings.Contains(out, `nodepool "second": no instance type has room`), framework.TailLines(out, 3)
				})
				framework.WantClaims(t, 0)
			}},
		{name: "joiner explain pod names the requirement that keeps each NodePool from the pod", app: "armless", pods: 0,
			setup: strings.Replace(strings.SplitN(framework.PoolAndClass, "---", 2)[1], "name: default}", "name: second}", 1) + "---\n" +
				framework.Deployment("armless", 1, "250m", "256Mi", "      nodeSelector: {kubernetes.io/arch: arm64}\n"),
			check: func(t *testing.T) {
				framework.Eventually(t, time.Minute, "explain pod naming kubernetes.io/arch for both NodePools", func() (bool, string) {
					// The Deployment's pod may not be created yet.
					var pods corev1.PodList
					if err := framework.Kube.List(t.Context(), &pods, client.InNamespace("default"), client.MatchingLabels{"app": "armless"}); err != nil || len(pods.Items) != 1 {
						return false, fmt.Sprintf("%d pods (%v)", len(pods.Items), err)
					}
					key := "default/" + pods.Items[0].Name
					out, err := exec.Command(framework.Binary, "explain", "pod", key, "--endpoint", fmt.Sprintf("http://127.0.0.1:%d", port)).CombinedOutput()
					for _, pool := range []string{"default", "second"} {
						if err != nil || !regexp.MustCompile(`(?m)^  nodepool "`+pool+`": .*kubernetes\.io/arch`).Match(out) {
							return false, string(out)
						}
					}
					return true, ""
				})
				framework.WantClaims(t, 0)
			}},
		{name: "pods that fit an existing node get no NodeClaim", app: "fits", pods: 2,
			setup: `apiVersion: v1
kind: Node
metadata:
  name: existing-capacity
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: existing-capacity, kubernetes.io/arch: amd64, kubernetes.io/os: linux}
status:
  allocatable: {cpu: "8", memory: 16Gi, pods: "110"}
  capacity: {cpu: "8", memory: 16Gi, pods: "110"}
---
` + framework.Deployment("fits", 2, "1", "1Gi", ""),
			check: func(t *testing.T) {
				_, nodes := framework.Running(t, map[string]string{"app": "fits"})
				if nodes["existing-capacity"] != 2 {
					t.Fatalf("pods on %v", nodes)
				}
				framework.WantClaims(t, 0)
				framework.Kubectl(t, "", "delete", "node", "existing-capacity")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { framework.ResetCluster(t) })
			pool := framework.PoolAndClass
			if tc.anyPool {
				pool = strings.Replace(strings.Replace(pool, "      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n", "", 1),
					"      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}\n", "", 1)
				pool = strings.Replace(pool, "      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n", "      - {key: kubernetes.io/os, operator: In, values: [linux]}\n", 1)
			}
			if tc.taint {
				pool = strings.Replace(pool, "      requirements:", "      taints: [{key: dedicated, value: infra, effect: NoSchedule}]\n      requirements:", 1)
			}
			framework.Kubectl(t, pool, "apply", "-f", "-")
			framework.Kubectl(t, tc.setup, "apply", "-f", "-")
			if tc.pods > 0 {
				framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%d %s pods Running", tc.pods, tc.app), func() (bool, string) {
					n, nodes := framework.Running(t, map[string]string{"app": tc.app})
					return n == tc.pods, fmt.Sprintf("%d running on %v", n, nodes)
				})
			}
			tc.check(t)
		})
	}
}
