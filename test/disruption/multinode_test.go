package disruption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestMultiNodeScaleDown scales a mixed workload of 1,000 pods down to 20%
// and checks that consolidation brings the cluster's $/h within 1.15× the
// LP lower bound of the remaining pods, within 10 minutes, without evicting
// pods over and over.
func TestMultiNodeScaleDown(t *testing.T) {
	framework.StartJoiner(t, "DISRUPTION_POLL=5s")
	t.Cleanup(func() { framework.ResetCluster(t) })
	poolYAML := mixed(t, "load", "10s", 250)
	framework.Eventually(t, 5*time.Minute, "1,000 pods running", func() (bool, string) { return mixedRunning(t, "load", 1000) })
	before := len(framework.NodeClaims(t))
	var initial []string
	for _, nc := range framework.NodeClaims(t) {
		initial = append(initial, nc.Labels[corev1.LabelInstanceTypeStable])
	}
	t.Logf("initial nodes: %v", initial)
	scaleMixed(t, "load", 50)
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var np v1.NodePool
	if err := yaml.Unmarshal([]byte(strings.SplitN(poolYAML, "---", 2)[1]), &np); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lastLog := start
	var ratio, price, bound float64
	var reached time.Duration
	settled, lastPrice := time.Now(), 0.0
	// Within 10 minutes the cluster must come within 1.15x of the bound;
	// the test then watches until consolidation settles (a minute without
	// a change in price), and the bound must still hold.
	framework.Eventually(t, 10*time.Minute, "the cluster within 1.15x the LP bound, settled", func() (bool, string) {
		var pods corev1.PodList
		if err := framework.Kube.List(context.Background(), &pods, client.InNamespace("default")); err != nil {
			return false, err.Error()
		}
		var remaining []*corev1.Pod
		for i := range pods.Items {
			p := &pods.Items[i]
			if strings.HasPrefix(p.Name, "load-") && p.DeletionTimestamp == nil {
				c := p.DeepCopy()
				c.Spec.NodeName = ""
				remaining = append(remaining, c)
			}
		}
		if len(remaining) != 200 {
			return false, fmt.Sprintf("%d pods", len(remaining))
		}
		bound, err = scheduling.LowerBound(scheduling.Snapshot{Pods: remaining, NodePools: []scheduling.NodePool{{NodePool: &np, InstanceTypes: its}}})
		if err != nil {
			return false, err.Error()
		}
		price = clusterPrice(framework.NodeClaims(t), its)
		ratio = price / bound
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			t.Logf("after %s: %d nodes, $%.3f/h, %.3fx", time.Since(start).Round(time.Second), len(framework.NodeClaims(t)), price, ratio)
		}
		if price != lastPrice {
			settled, lastPrice = time.Now(), price
		}
		if ratio <= 1.15 && reached == 0 {
			reached = time.Since(start)
		}
		return ratio <= 1.15 && time.Since(settled) > time.Minute, fmt.Sprintf("$%.3f/h against a bound of $%.3f/h: %.3f", price, bound, ratio)
	})
	// Evictions per pod: a pod a ReplicaSet recreates is a new pod, so
	// each can be evicted once at most; the total per remaining pod says
	// how often the workload moved.
	out := framework.Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=Evicted", "-o", "custom-columns=POD:.involvedObject.name,COUNT:.count", "--no-headers")
	evictions, perPod := 0, map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var name string
		var count int
		if _, err := fmt.Sscan(line, &name, &count); err == nil {
			evictions += count
			perPod[name] += count
		}
	}
	for name, n := range perPod {
		if n > 2 {
			t.Errorf("pod %s evicted %d times", name, n)
		}
	}
	var kinds []string
	for _, nc := range framework.NodeClaims(t) {
		kinds = append(kinds, nc.Labels[corev1.LabelInstanceTypeStable])
	}
	t.Logf("final nodes: %v", kinds)
	t.Logf("1,000 pods on %d nodes scaled to 200: within 1.15x after %s; settled at $%.3f/h, %.3fx the LP bound of $%.3f/h, on %d nodes, after %s; %d evictions, %.2f per pod",
		before, reached.Round(time.Second), price, ratio, bound, len(framework.NodeClaims(t)), settled.Sub(start).Round(time.Second), evictions, float64(evictions)/200)
}

// mixedShapes are four pod shapes, CPU-heavy to memory-heavy.
var mixedShapes = [][2]string{{"2", "1Gi"}, {"500m", "4Gi"}, {"1", "2Gi"}, {"250m", "256Mi"}}

// mixed applies the test NodePool with consolidateAfter and a Deployment
// prefix-i of each shape with replicas each, and returns the pool's YAML.
func mixed(t *testing.T, prefix, consolidateAfter string, replicas int) string {
	pool := strings.Replace(framework.PoolAndClass, "  template:\n", "  disruption: {consolidateAfter: "+consolidateAfter+"}\n  template:\n", 1)
	framework.Kubectl(t, pool, "apply", "-f", "-")
	for i, s := range mixedShapes {
		framework.Kubectl(t, framework.Deployment(fmt.Sprintf("%s-%d", prefix, i), replicas, s[0], s[1], ""), "apply", "-f", "-")
	}
	return pool
}

func scaleMixed(t *testing.T, prefix string, replicas int) {
	for i := range mixedShapes {
		framework.Kubectl(t, "", "scale", fmt.Sprintf("deployment/%s-%d", prefix, i), fmt.Sprintf("--replicas=%d", replicas))
	}
}

func mixedRunning(t *testing.T, prefix string, want int) (bool, string) {
	n := 0
	for i := range mixedShapes {
		c, _ := framework.Running(t, map[string]string{"app": fmt.Sprintf("%s-%d", prefix, i)})
		n += c
	}
	return n == want, fmt.Sprintf("%d of %d pods running", n, want)
}

func clusterPrice(claims []v1.NodeClaim, its []*cloudprovider.InstanceType) float64 {
	total := 0.0
	for _, nc := range claims {
		for _, it := range its {
			if it.Name != nc.Labels[corev1.LabelInstanceTypeStable] {
				continue
			}
			for _, o := range it.Offerings {
				if o.Zone == nc.Labels[corev1.LabelTopologyZone] && o.CapacityType == nc.Labels[v1.LabelCapacityType] {
					total += o.Price
				}
			}
		}
	}
	return total
}
