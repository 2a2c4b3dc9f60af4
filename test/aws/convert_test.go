package aws

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
)

// TestConvertLegacySeed converts the legacy guide's v1alpha5 Provisioner
// and v1alpha1 AWSNodeTemplate with `joiner convert`, applies the output to
// our CRDs, and scales a Deployment: the node must be what the Provisioner
// meant (on-demand, in the Seoul zones it named, of category c, t or m),
// and the NodePool must consolidate as consolidation.enabled asked.
func TestConvertLegacySeed(t *testing.T) {
	const seoul = "ap-northeast-2"
	ctx := context.Background()
	other, err := fakeaws.Start(ctx, fakeaws.Options{ClusterName: clusterName, Region: seoul, Kubeconfig: framework.Cluster.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	explainBootsOf(t, other)
	framework.StartJoinerArgs(t, []string{"--region=" + seoul}, awsEnv("AWS_ENDPOINT_URL="+other.URL())...)
	t.Cleanup(func() { framework.ResetCluster(t) })

	seed := filepath.Join(framework.Cluster.Root, "test", "testdata", "seed-manifests", "05-legacy-v1alpha5.yaml")
	// The legacy cluster's workloads select their Provisioner by its
	// pre-v1beta1 label, which no v1 node has: unconverted, they would
	// never schedule.
	workloads := filepath.Join(t.TempDir(), "workloads.yaml")
	if err := os.WriteFile(workloads, []byte(legacyWorkloads), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	// The AWSNodeTemplate's AMI family is v1alpha1's default, AL2, which has no
	// images for the control plane's Kubernetes (1.33): the flag picks AL2023.
	cmd := exec.Command(framework.Binary, "convert", "-f", seed, "-f", workloads, "--role", "KarpenterNodeRole-"+clusterName, "--ami-family", "AL2023")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("joiner convert: %v\n%s", err, stderr.String())
	}
	t.Logf("joiner convert's notes:\n%s", stderr.String())
	framework.Kubectl(t, stdout.String(), "apply", "-f", "-")

	framework.Eventually(t, time.Minute, "the converted EC2NodeClass is Ready", func() (bool, string) {
		nc := &awsv1.EC2NodeClass{}
		if err := framework.Kube.Get(ctx, types.NamespacedName{Name: "default"}, nc); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(nc.Status.Conditions, "Ready"), fmt.Sprintf("%v", nc.Status.Conditions)
	})
	framework.Kubectl(t, framework.Deployment("legacy", 2, "500m", "512Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "two legacy pods run", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "legacy"})
		return n == 2, fmt.Sprintf("%d running on %v", n, nodes)
	})
	// The converted workloads land on the converted pool's nodes.
	for _, app := range []string{"legacy-selector", "legacy-affinity"} {
		framework.Eventually(t, 3*time.Minute, app+"'s pod runs", func() (bool, string) {
			n, nodes := framework.Running(t, map[string]string{"app": app})
			return n == 1, fmt.Sprintf("%d running on %v", n, nodes)
		})
		_, nodes := framework.Running(t, map[string]string{"app": app})
		for name := range nodes {
			node := &corev1.Node{}
			if err := framework.Kube.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
				t.Fatal(err)
			}
			if node.Labels[v1.LabelNodePool] != "default" {
				t.Errorf("%s runs on %s, whose nodepool label is %q; want the converted NodePool default", app, name, node.Labels[v1.LabelNodePool])
			}
		}
	}

	claims := framework.Registered(t)
	if len(claims) == 0 {
		t.Fatal("pods run but there is no NodeClaim")
	}
	zones := []string{seoul + "a", seoul + "b", seoul + "c"}
	for _, nc := range claims {
		node := &corev1.Node{}
		if err := framework.Kube.Get(ctx, types.NamespacedName{Name: nc.Status.NodeName}, node); err != nil {
			t.Fatalf("NodeClaim %s's node: %v", nc.Name, err)
		}
		// The Node's labels come from the kubelet and the user data: what
		// the instance really is.
		l := node.Labels
		category := nc.Labels["karpenter.k8s.aws/instance-category"]
		if l[v1.LabelCapacityType] != v1.CapacityTypeOnDemand || !slices.Contains(zones, l[corev1.LabelTopologyZone]) ||
			!slices.Contains([]string{"c", "t", "m"}, category) || l[corev1.LabelArchStable] != "amd64" || l[v1.LabelNodePool] != "default" {
			t.Errorf("node %s: capacity %s, zone %s, type %s (category %q), arch %s, nodepool %s; want on-demand amd64 c/t/m in %v from NodePool default",
				node.Name, l[v1.LabelCapacityType], l[corev1.LabelTopologyZone], l[corev1.LabelInstanceTypeStable], category, l[corev1.LabelArchStable], l[v1.LabelNodePool], zones)
		}
	}

	np := &v1.NodePool{}
	if err := framework.Kube.Get(ctx, types.NamespacedName{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	if d := np.Spec.Disruption; d.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmptyOrUnderutilized || d.ConsolidateAfter.String() != "0s" {
		t.Errorf("NodePool disruption %s after %s; consolidation.enabled meant WhenEmptyOrUnderutilized after 0s", d.ConsolidationPolicy, d.ConsolidateAfter.String())
	}
	if !np.Spec.Template.Spec.ExpireAfter.IsNever() {
		t.Errorf("NodePool expireAfter %s; the Provisioner had no TTL, so Never", np.Spec.Template.Spec.ExpireAfter.String())
	}
}

// legacyWorkloads select the v1alpha5 Provisioner "default" by its label,
// in a nodeSelector and in a required node affinity term.
const legacyWorkloads = `apiVersion: apps/v1
kind: Deployment
metadata: {name: legacy-selector, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: legacy-selector}}
  template:
    metadata: {labels: {app: legacy-selector}}
    spec:
      nodeSelector: {karpenter.sh/provisioner-name: default}
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 250m, memory: 256Mi}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: legacy-affinity, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: legacy-affinity}}
  template:
    metadata: {labels: {app: legacy-affinity}}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: karpenter.sh/provisioner-name, operator: In, values: [default]}]
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 250m, memory: 256Mi}}}]
`
