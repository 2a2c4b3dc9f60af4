package aws

import (
	"fmt"
	"math"
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
// the best split, found here by trying each. Scaled to 8 pods, the fleet
// ends on 8 on-demand nodes (the RIs), with no node replaced by spot.
func TestCommitmentsInPlans(t *testing.T) {
	f := startFake(t, false)
	explainBoots(t, f)
	if err := f.SetSpotPrice("m5.large", spotM5Large); err != nil {
		t.Fatal(err)
	}
	buyRIs(t, f, "m5.large", fmt.Sprint(riCount))
	buySavingsPlan(t, f, "1.00")
	framework.ResetCluster(t)
	j := framework.StartJoiner(t, awsEnv("AWS_ENDPOINT_URL="+f.URL(), "COMMITMENTS_REFRESH_INTERVAL=5s")...)
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

	framework.Kubectl(t, "", "scale", "deployment/web", "--replicas=8")
	framework.Eventually(t, 8*time.Minute, "8 pods on 8 on-demand nodes", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "web"})
		od, spot, _ := count()
		return n == 8 && od == 8 && spot == 0, fmt.Sprintf("%d running on %d on-demand and %d spot", n, od, spot)
	})
	for _, nc := range framework.NodeClaims(t) {
		if !before[nc.Name] && nc.Labels[v1.LabelCapacityType] == "spot" {
			t.Errorf("NodeClaim %s launched on spot after the scale-down: a node the RIs cover was replaced by spot", nc.Name)
		}
	}
}
