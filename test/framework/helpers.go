package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Running counts the Running pods with the label, and where they run.
func Running(t testing.TB, selector map[string]string) (int, map[string]int) {
	var pods corev1.PodList
	if err := Kube.List(context.Background(), &pods, client.InNamespace("default"), client.MatchingLabels(selector)); err != nil {
		t.Fatal(err)
	}
	n, nodes := 0, map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			n++
			nodes[p.Spec.NodeName]++
		}
	}
	return n, nodes
}

// NodeClaims lists every NodeClaim.
func NodeClaims(t testing.TB) []v1.NodeClaim {
	var claims v1.NodeClaimList
	if err := Kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	return claims.Items
}

// FreePort returns a free loopback port.
func FreePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// NodeReady reports the Ready condition.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PoolAndClass is an on-demand c/m/r amd64 NodePool and its EC2NodeClass.
const PoolAndClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`

// Deployment is a pause Deployment labelled app=name.
func Deployment(name string, replicas int, cpu, mem string, extraSpec string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: %[3]s, memory: %[4]s}}}]
%[5]s`, name, replicas, cpu, mem, extraSpec)
}

// WaitEvent waits for a FailedScheduling event with text.
func WaitEvent(t testing.TB, text string) {
	t.Helper()
	Eventually(t, time.Minute, "a FailedScheduling event with "+text, func() (bool, string) {
		out := Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=FailedScheduling", "-o", "custom-columns=MSG:.message")
		return strings.Contains(out, text), TailLines(out, 3)
	})
}

// WantClaims checks, after a grace period, that n NodeClaims exist.
func WantClaims(t testing.TB, n int) {
	t.Helper()
	// Give a late batch the chance to add more than it should.
	time.Sleep(2 * time.Second)
	claims := NodeClaims(t)
	if len(claims) != n {
		var names []string
		for _, nc := range claims {
			names = append(names, nc.Name+"/"+nc.Labels["node.kubernetes.io/instance-type"])
		}
		t.Fatalf("%d nodeclaims %v, want %d", len(claims), names, n)
	}
}

// ReadSeed returns one of the installation guides' manifests.
func ReadSeed(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Cluster.Root, "test", "testdata", "seed-manifests", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
