package provisioning

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func seed(name string) string {
	return filepath.Join(framework.Cluster.Root, "test", "testdata", "seed-manifests", name)
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// planFor runs the offline planner on manifests, as `joiner plan` does.
func planFor(t testing.TB, region string, zones []string, files ...string) *scheduling.Plan {
	t.Helper()
	objs, err := manifests.LoadFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	its, err := catalog.InstanceTypes(catalog.Options{Region: region, Zones: zones})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := objs.Snapshot(its)
	return scheduling.Solve(snap, scheduling.Options{})
}

// claimTypes lists the instance types of the NodeClaims, sorted.
func claimTypes(claims []v1.NodeClaim) []string {
	var out []string
	for _, nc := range claims {
		out = append(out, nc.Labels[corev1.LabelInstanceTypeStable]+"/"+nc.Labels[v1.LabelCapacityType])
	}
	sort.Strings(out)
	return out
}

func planTypes(p *scheduling.Plan) []string {
	var out []string
	for _, nc := range p.NewNodeClaims {
		out = append(out, nc.InstanceType.Name+"/"+nc.Offering.CapacityType)
	}
	sort.Strings(out)
	return out
}

func TestGuide03ScaleUp(t *testing.T) {
	port := framework.FreePort(t)
	j := framework.StartJoiner(t, fmt.Sprintf("METRICS_PORT=%d", port))
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, "", "apply", "-f", seed("03-scale-up-down.yaml"))
	framework.Eventually(t, 2*time.Minute, "5 inflate pods Running", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 5, fmt.Sprintf("%d running on %v", n, nodes)
	})
	claims := framework.NodeClaims(t)
	want := planFor(t, "", nil, seed("03-scale-up-down.yaml"))
	if got, exp := claimTypes(claims), planTypes(want); strings.Join(got, ",") != strings.Join(exp, ",") {
		t.Errorf("controller made %v, joiner plan says %v", got, exp)
	}
	// The cheapest set that fits: one c6a.2xlarge at $0.306 (the guide saw
	// a c5a.2xlarge at $0.308 from Karpenter).
	if math.Abs(want.TotalPrice()-0.306) > 1e-9 {
		t.Errorf("plan costs $%.4f, want $0.306", want.TotalPrice())
	}
	for _, nc := range claims {
		if nc.Labels[v1.LabelCapacityType] != v1.CapacityTypeOnDemand || !strings.HasPrefix(nc.Name, "default-") {
			t.Errorf("nodeclaim %s: %v", nc.Name, nc.Labels)
		}
		// Karpenter's metadata: labels, hash annotations, owner and finalizer.
		if nc.Labels[v1.LabelNodePool] != "default" || nc.Labels["karpenter.k8s.aws/ec2nodeclass"] != "default" {
			t.Errorf("nodeclaim %s labels %v", nc.Name, nc.Labels)
		}
		if nc.Annotations[v1.AnnotationNodePoolHash] == "" || nc.Annotations[v1.AnnotationNodePoolHashVersion] != v1.NodePoolHashVersion {
			t.Errorf("nodeclaim %s annotations %v", nc.Name, nc.Annotations)
		}
		if len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].Kind != "NodePool" || nc.OwnerReferences[0].Name != "default" ||
			nc.OwnerReferences[0].BlockOwnerDeletion == nil || !*nc.OwnerReferences[0].BlockOwnerDeletion {
			t.Errorf("nodeclaim %s owner references %+v", nc.Name, nc.OwnerReferences)
		}
		if len(nc.Finalizers) != 1 || nc.Finalizers[0] != v1.TerminationFinalizer {
			t.Errorf("nodeclaim %s finalizers %v", nc.Name, nc.Finalizers)
		}
		var node corev1.Node
		if err := framework.Kube.Get(context.Background(), client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
			t.Fatalf("node of %s: %v", nc.Name, err)
		}
		if !framework.NodeReady(&node) {
			t.Errorf("node %s not Ready", node.Name)
		}
	}
	// Pods can run a moment before the NodeClaim is recorded as initialized.
	framework.Eventually(t, 30*time.Second, "Karpenter's metrics", func() (bool, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, m := range []string{`karpenter_nodeclaims_created_total{nodepool="default",reason="provisioned"} 1`, `karpenter_nodeclaims_initialized_total{nodepool="default"} 1`, "karpenter_provisioner_scheduling_duration_seconds_count"} {
			if !strings.Contains(string(body), m) {
				var have []string
				for _, l := range strings.Split(string(body), "\n") {
					if strings.HasPrefix(l, "karpenter_nodeclaims") {
						have = append(have, l)
					}
				}
				return false, "metrics lack " + m + "; have " + strings.Join(have, " | ")
			}
		}
		return true, ""
	})
	logs := j.Logs()
	for _, msg := range []string{"found provisionable pod(s)", "computed new nodeclaim(s) to fit pod(s)", "created nodeclaim", "launched nodeclaim", "registered nodeclaim", "initialized nodeclaim"} {
		if !strings.Contains(logs, `"message":"`+msg+`"`) {
			t.Errorf("logs lack %q", msg)
		}
	}
}

func TestGuide02SpotTaintedAndLimit(t *testing.T) {
	j := framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, "", "apply", "-f", seed("02-spot-tainted-nodepool.yaml"))
	sel := map[string]string{"app": "spot-workload"}
	framework.Eventually(t, 2*time.Minute, "3 spot-workload pods Running", func() (bool, string) {
		n, nodes := framework.Running(t, sel)
		return n == 3, fmt.Sprintf("%d running on %v", n, nodes)
	})
	for _, nc := range framework.NodeClaims(t) {
		var node corev1.Node
		if err := framework.Kube.Get(context.Background(), client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
			t.Fatal(err)
		}
		if node.Labels[corev1.LabelInstanceTypeStable] != "t3a.large" || node.Labels[v1.LabelCapacityType] != "spot" || node.Labels["node-group-type"] != "spot" {
			t.Errorf("node %s labels %v", node.Name, node.Labels)
		}
		tainted := false
		for _, taint := range node.Spec.Taints {
			tainted = tainted || (taint.Key == "spot" && taint.Value == "only" && taint.Effect == corev1.TaintEffectNoSchedule)
		}
		if !tainted {
			t.Errorf("node %s lacks spot=only:NoSchedule: %v", node.Name, node.Spec.Taints)
		}
	}

	// limits.cpu 16 allows eight 2-cpu t3a.large nodes, three pods each.
	framework.Kubectl(t, "", "scale", "deployment/spot-workload", "--replicas=40")
	framework.Eventually(t, 3*time.Minute, "24 pods Running on 8 nodes", func() (bool, string) {
		n, nodes := framework.Running(t, sel)
		return n == 24 && len(framework.NodeClaims(t)) == 8, fmt.Sprintf("%d running on %d nodes, %d nodeclaims", n, len(nodes), len(framework.NodeClaims(t)))
	})
	framework.Eventually(t, time.Minute, "an event naming the limit", func() (bool, string) {
		out := framework.Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=FailedScheduling", "-o", "custom-columns=MSG:.message")
		return strings.Contains(out, `all available instance types exceed limits for nodepool: "spot"`), framework.TailLines(out, 3)
	})
	// A later batch must not go past the limit either: let one run whole
	// after the eight nodes are up.
	j.WaitForBatches(t, 1)
	if n := len(framework.NodeClaims(t)); n != 8 {
		t.Fatalf("%d nodeclaims, want the limit's 8", n)
	}
}

func TestGuide01OtherRegion(t *testing.T) {
	framework.StartJoiner(t, "KWOK_REGION=ap-northeast-2")
	t.Cleanup(func() { framework.ResetCluster(t) })
	// The guide's manifest with its typo fixed: limits, not limit.
	fixed := strings.Replace(readFile(t, seed("01-t4g-spot-nodepool.yaml")), "\n  limit:\n", "\n  limits:\n", 1)
	framework.Kubectl(t, fixed, "apply", "-f", "-")
	framework.Kubectl(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 250m, memory: 256Mi}}}]
`, "apply", "-f", "-")
	framework.Eventually(t, 2*time.Minute, "2 web pods Running", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "web"})
		return n == 2, fmt.Sprintf("%d running on %v", n, nodes)
	})
	for _, nc := range framework.NodeClaims(t) {
		l := nc.Labels
		if !strings.HasPrefix(l[corev1.LabelInstanceTypeStable], "t4g.") || l[corev1.LabelArchStable] != "arm64" ||
			l[corev1.LabelTopologyZone] != "ap-northeast-2a" || l[corev1.LabelTopologyRegion] != "ap-northeast-2" {
			t.Errorf("nodeclaim %s: type %s arch %s zone %s region %s", nc.Name, l[corev1.LabelInstanceTypeStable], l[corev1.LabelArchStable], l[corev1.LabelTopologyZone], l[corev1.LabelTopologyRegion])
		}
	}
}
