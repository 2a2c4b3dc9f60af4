package aws

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// The account of issue 38's acceptance: 8 regional m5.large RIs, a $1.00/h
// Compute Savings Plan (m5.large at 0.0672, the fake's 30% off), and
// m5.large spot at 0.08, between the plan's rate and the list price.
const (
	listM5Large = 0.096
	spM5Large   = 0.0672
	spotM5Large = 0.08
	riCount     = 8
	spDollars   = 1.0
)

// costLine is the viewer header's list and effective $/h.
var costLine = regexp.MustCompile(`\$([0-9.]+)/hour list · \$([0-9.]+)/hour effective`)

// bill is what the account pays per hour beyond its commitments' fees
// for onDemand m5.large on demand and spot on spot, worked out here from
// the account as AWS bills it: RIs cover instances first, the plan's
// dollars then cover the rest at its rate (a share of the last one), the
// remainder at list. The plan's commitment counts as spent where used.
func bill(onDemand, spot int) float64 {
	rest := float64(max(onDemand-riCount, 0))
	covered := math.Min(rest, spDollars/spM5Large)
	return covered*spM5Large + (rest-covered)*listM5Large + float64(spot)*spotM5Large
}

// TestCommitmentsInPlans: 30 pods that each need an m5.large, on a pool
// that allows spot and on-demand m5.large. On-demand nodes take the 8 RIs
// and the plan's dollars, the rest go on spot: the bill is within 1% of
// the best split, found here by trying each, and karpenter_nodepools_cost_total
// is that bill. Scaled to 8 pods, the fleet ends on 8 on-demand nodes (the
// RIs), with no node replaced by spot; the nodes that go are the ones
// beyond the RIs (on-demand never drops below 8 on the way).
func TestCommitmentsInPlans(t *testing.T) {
	f := startFake(t, false)
	explainBoots(t, f)
	if err := f.SetSpotPrice("m5.large", spotM5Large); err != nil {
		t.Fatal(err)
	}
	buyRIs(t, f, "m5.large", fmt.Sprint(riCount))
	buySavingsPlan(t, f, "1.00")
	framework.ResetCluster(t)
	port := framework.FreePort(t)
	j := framework.StartJoiner(t, awsEnv("AWS_ENDPOINT_URL="+f.URL(), "COMMITMENTS_REFRESH_INTERVAL=5s", fmt.Sprintf("METRICS_PORT=%d", port))...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifest := strings.Replace(framework.PoolAndClass, "values: [on-demand]}", "values: [spot, on-demand]}\n      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}", 1)
	manifest = strings.Replace(manifest, "spec:\n  template:", "spec:\n  disruption: {consolidateAfter: 5s, budgets: [{nodes: 100%}]}\n  template:", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 30, "1200m", "4Gi", ""), "apply", "-f", "-")
	framework.Eventually(t, 5*time.Minute, "30 pods run", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "web"})
		return n == 30, fmt.Sprintf("%d running", n)
	})
	count := func() (onDemand, spot int, names map[string]bool) {
		names = map[string]bool{}
		for _, nc := range framework.NodeClaims(t) {
			names[nc.Name] = true
			switch nc.Labels[v1.LabelCapacityType] {
			case "on-demand":
				onDemand++
			case "spot":
				spot++
			}
		}
		return onDemand, spot, names
	}
	od, spot, before := count()
	best, bestOD := math.Inf(1), 0
	for k := 0; k <= 30; k++ {
		if b := bill(k, 30-k); b < best {
			best, bestOD = b, k
		}
	}
	got := bill(od, spot)
	t.Logf("%d on-demand and %d spot m5.large: $%.4f/h beyond the commitments; the best split, %d on-demand, $%.4f/h", od, spot, got, bestOD, best)
	if od < riCount || got > 1.01*best {
		t.Fatalf("%d on-demand and %d spot cost $%.4f/h, over 1%% above the best split (%d on-demand, $%.4f/h):\n%s", od, spot, got, bestOD, best, framework.Decisions(j.Logs()))
	}
	// karpenter_nodepools_cost_total is the bill worked out here, not the
	// list prices; the list cost and the commitments' use are beside it.
	for _, m := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"karpenter_nodepools_cost_total", map[string]string{"nodepool": "default"}, got},
		{"joiner_nodepools_effective_cost", map[string]string{"nodepool": "default"}, got},
		{"joiner_nodepools_list_cost", map[string]string{"nodepool": "default"}, float64(od)*listM5Large + float64(spot)*spotM5Large},
		{"joiner_commitments_utilization", map[string]string{"kind": "reserved-instance"}, 1},
		{"joiner_commitments_utilization", map[string]string{"kind": "savings-plan"}, math.Min(1, float64(od-riCount)*spM5Large/spDollars)},
	} {
		v, ok := scrapeGauge(port, m.family, m.labels)
		if !ok || math.Abs(v-m.want) > 1e-6 {
			t.Errorf("%s%v = %v (served %v), want %v", m.family, m.labels, v, ok, m.want)
		}
	}
	// The viewer, in a terminal, prices the same nodes both ways and
	// says what the commitments have in use and idle.
	tm := framework.StartTmux(t, 250, 60, append([]string{"KUBECONFIG=" + framework.Cluster.Kubeconfig}, awsEnv("AWS_ENDPOINT_URL="+f.URL())...),
		framework.Binary, "viewer", "--kubeconfig", framework.Cluster.Kubeconfig)
	list := float64(od)*listM5Large + float64(spot)*spotM5Large
	screen := tm.WaitFor(2*time.Minute, fmt.Sprintf("the viewer's list ($%.4f/h) and effective ($%.4f/h) cost, and the commitments' use", list, got), func(s string) bool {
		m := costLine.FindStringSubmatch(s)
		return m != nil && m[1] == fmt.Sprintf("%.4f", list) && m[2] == fmt.Sprintf("%.4f", got) &&
			strings.Contains(s, "RI m5.large ×8 (regional): 8 in use, 0 idle") && strings.Contains(s, "Compute Savings Plan $1.00/h")
	})
	t.Logf("the viewer's header: %s", strings.SplitN(screen, "\n", 2)[0])

	framework.Kubectl(t, "", "scale", "deployment/web", "--replicas=8")
	leastOD := od
	framework.Eventually(t, 8*time.Minute, "8 pods on 8 on-demand nodes", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "web"})
		od, spot, _ := count()
		leastOD = min(leastOD, od)
		return n == 8 && od == 8 && spot == 0, fmt.Sprintf("%d running on %d on-demand and %d spot", n, od, spot)
	})
	if leastOD < riCount {
		t.Errorf("on-demand went down to %d on the way, below the %d RIs: a node the RIs cover went before the others", leastOD, riCount)
	}
	for _, nc := range framework.NodeClaims(t) {
		if !before[nc.Name] && nc.Labels[v1.LabelCapacityType] == "spot" {
			t.Errorf("NodeClaim %s launched on spot after the scale-down: a node the RIs cover was replaced by spot", nc.Name)
		}
	}
}
