//go:build scale

package consolidation

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestMultiNodeScaleDown scales a mixed workload of 1,000 pods down to 20%
// and checks that consolidation brings the cluster's $/h within 1.15x the
// LP lower bound of the remaining pods, within 10 minutes, with every pod
// Running at the end, and without moving pods over and over.
//
// A move is one eviction that the workload has to make up for: the
// ReplicaSet creates a new pod (under a new name) for each pod evicted, so
// the moves are counted as the ReplicaSets' pod creations after the
// scale-down, and "moves per pod" is that count over the 200 pods left.
// Each new pod is traced back to the evicted pod it replaces, so a replica
// evicted again and again shows as one lineage of many moves.
//
// This is the end-to-end counterpart of pkg/disruption's
// TestScaleDownConvergence, which replays the same workload with a model of
// kube-scheduler for several seeds; here the real kube-scheduler places the
// evicted pods, once.
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
	moves := watchMoves(t, 50)
	t.Cleanup(func() {
		if t.Failed() {
			total, perOwner, longest := moves.result()
			t.Logf("moves so far: %d, per ReplicaSet %v, at most %d for one replica", total, perOwner, longest)
		}
	})
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
	// A failure says why each node stayed: the last reason consolidation
	// gave for it.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var events corev1.EventList
		if err := framework.Kube.List(context.Background(), &events); err != nil {
			return
		}
		last := map[string]corev1.Event{}
		for _, e := range events.Items {
			if e.Reason != "DisruptionBlocked" && e.Reason != "Unconsolidatable" || e.InvolvedObject.Kind != "Node" {
				continue
			}
			if cur, ok := last[e.InvolvedObject.Name]; !ok || e.LastTimestamp.After(cur.LastTimestamp.Time) {
				last[e.InvolvedObject.Name] = e
			}
		}
		for name, e := range last {
			t.Logf("node %s stays: %s %s", name, e.Reason, e.Message)
		}
	})
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
	// Settled: a minute without a change in price, so no command is under
	// way and every evicted pod has had its replacement placed.
	if ok, state := mixedRunning(t, "load", 200); !ok {
		t.Errorf("after consolidation settled: %s", state)
	}
	var pods corev1.PodList
	if err := framework.Kube.List(context.Background(), &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s is %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
	total, perOwner, longest := moves.result()
	evicted := 0
	out := framework.Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=Evicted", "-o", "custom-columns=COUNT:.count", "--no-headers")
	for _, line := range strings.Fields(out) {
		var n int
		if _, err := fmt.Sscan(line, &n); err == nil {
			evicted += n
		}
	}
	var kinds []string
	for _, nc := range framework.NodeClaims(t) {
		kinds = append(kinds, nc.Labels[corev1.LabelInstanceTypeStable])
	}
	t.Logf("final nodes: %v", kinds)
	t.Logf("1,000 pods on %d nodes scaled to 200: within 1.15x after %s; settled at $%.3f/h, %.3fx the LP bound of $%.3f/h, on %d nodes, after %s; %d moves (%d Evicted events), %.2f per pod, per ReplicaSet %v, at most %d for one replica",
		before, reached.Round(time.Second), price, ratio, bound, len(framework.NodeClaims(t)), settled.Sub(start).Round(time.Second), total, evicted, float64(total)/200, perOwner, longest)
	if total > 3*200 {
		t.Errorf("%d moves for 200 pods, want at most three per pod on average", total)
	}
	if longest > maxReplicaMoves {
		t.Errorf("one replica moved %d times, want at most %d", longest, maxReplicaMoves)
	}
}

// maxReplicaMoves bounds how often one replica may be moved on the way to
// the converged cluster. Runs have moved the workload 1.7 to 2.4 times per
// pod on average and one replica up to 9 times (a clean-clone make test on
// 2026-11-26, at 1.94 per pod; the offline replay, up to 7): the bounds,
// three per pod on average and 12 for one replica, leave room for
// kube-scheduler's random choices and catch a replace loop, which moves the
// same pods dozens of times.
const maxReplicaMoves = 12
