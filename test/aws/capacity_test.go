package aws

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
)

// capacityTypes are the pool's types in TestInsufficientCapacity; the test
// orders them by the catalog's price, which EC2's lowest-price strategy
// (and the endpoint's) launches by.
var capacityTypes = []string{"c6a.large", "c5a.large", "m6a.large"}

// TestInsufficientCapacity: with the cheapest type out of on-demand capacity
// in every zone, the first launch already lands on the next cheapest (one
// NodeClaim, one fleet call: EC2 falls through the overrides and reports the
// cheapest out), and the next launch does not offer the cheapest to EC2 at
// all, because the first fleet's errors put it in the unavailable cache.
// Once capacity is back and the entries have expired, a third launch gets
// the cheapest type again.
//
// Karpenter's TTL is a fixed 3 minutes; the test binary's internal
// JOINER_TEST_UNAVAILABLE_TTL (pkg/operator, joinertest tag) shortens it to
// unavailableTTL. The test waits for the cache's own "offering available
// again" lines, not for the time.
func TestInsufficientCapacity(t *testing.T) {
	prices := map[string]float64{}
	for _, it := range capacityTypes {
		prices[it] = onDemandPrice(t, it)
	}
	byPrice := slices.Clone(capacityTypes)
	sort.Slice(byPrice, func(i, j int) bool { return prices[byPrice[i]] < prices[byPrice[j]] })
	cheapest, next := byPrice[0], byPrice[1]

	fake.ResetCalls()
	explainBoots(t, fake)
	if err := fake.SetFaults(fakeaws.Faults{InsufficientCapacity: []fakeaws.Capacity{{InstanceType: cheapest, CapacityType: "on-demand"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.SetFaults(fakeaws.Faults{}) })
	j := framework.StartJoiner(t, awsEnv("JOINER_TEST_UNAVAILABLE_TTL="+unavailableTTL.String())...)
	t.Cleanup(func() { framework.ResetCluster(t) })

	pool := strings.Replace(framework.PoolAndClass, "      requirements:\n",
		"      requirements:\n      - {key: node.kubernetes.io/instance-type, operator: In, values: ["+strings.Join(capacityTypes, ", ")+"]}\n", 1)
	// No consolidation: the test is about launches.
	pool = strings.Replace(pool, "  template:\n", "  disruption: {consolidateAfter: Never}\n  template:\n", 1)
	framework.Kubectl(t, pool, "apply", "-f", "-")
	// One pod per node, so each replica added is a launch of its own.
	spread := `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: ice}}}
`
	framework.Kubectl(t, framework.Deployment("ice", 1, "500m", "512Mi", spread), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the pod runs", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "ice"})
		return n == 1, fmt.Sprintf("%d running", n)
	})

	claims := framework.NodeClaims(t)
	if len(claims) != 1 || j.Count("created nodeclaim") != 1 {
		t.Fatalf("%d NodeClaims, %d created; want the one of the first batch", len(claims), j.Count("created nodeclaim"))
	}
	if got := claims[0].Labels[corev1.LabelInstanceTypeStable]; got != next {
		t.Fatalf("launched %s, want %s, the cheapest type with capacity", got, next)
	}
	fleets := fake.Calls("ec2", "CreateFleet")
	if len(fleets) != 1 || len(fleets[0].Instances) != 1 || fleets[0].Fault != "insufficientCapacity" {
		t.Fatalf("fleet calls %+v; want one that launched one instance and reported %s out of capacity", fleets, cheapest)
	}
	if offered := fleetTypes(fleets[0]); !slices.Contains(offered, cheapest) {
		t.Fatalf("the first fleet offered %v: %s was never tried", offered, cheapest)
	}

	// The next launch leaves the cheapest out.
	framework.Kubectl(t, "", "scale", "deployment/ice", "--replicas=2")
	framework.Eventually(t, 3*time.Minute, "the second pod runs", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "ice"})
		return n == 2, fmt.Sprintf("%d running", n)
	})
	fleets = fake.Calls("ec2", "CreateFleet")
	if len(fleets) != 2 {
		t.Fatalf("%d fleet calls for two launches", len(fleets))
	}
	if offered := fleetTypes(fleets[1]); slices.Contains(offered, cheapest) || !slices.Contains(offered, next) {
		t.Fatalf("the second fleet offered %v; want %s left out (EC2 just said it has none) and %s in", offered, cheapest, next)
	}
	if fleets[1].Fault != "" {
		t.Fatalf("the second fleet met %s", fleets[1].Fault)
	}

	// Capacity comes back; the entries expire on their own.
	out := offeringsLogged(j, "offering unavailable", cheapest)
	if len(out) == 0 {
		t.Fatalf("no \"offering unavailable\" line for %s", cheapest)
	}
	if err := fake.SetFaults(fakeaws.Faults{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*unavailableTTL+time.Minute, "the cheapest type's offerings expire", func() (bool, string) {
		back := offeringsLogged(j, "offering available again", cheapest)
		for o := range out {
			if !back[o] {
				return false, fmt.Sprintf("out %v, back %v", slices.Sorted(maps.Keys(out)), slices.Sorted(maps.Keys(back)))
			}
		}
		return true, ""
	})
	framework.Kubectl(t, "", "scale", "deployment/ice", "--replicas=3")
	framework.Eventually(t, 3*time.Minute, "the third pod runs", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "ice"})
		return n == 3, fmt.Sprintf("%d running", n)
	})
	fleets = fake.Calls("ec2", "CreateFleet")
	if len(fleets) != 3 {
		t.Fatalf("%d fleet calls for three launches", len(fleets))
	}
	if offered := fleetTypes(fleets[2]); !slices.Contains(offered, cheapest) {
		t.Fatalf("the third fleet offered %v; want %s again, its entries expired", offered, cheapest)
	}
	if fleets[2].Fault != "" {
		t.Fatalf("the third fleet met %s", fleets[2].Fault)
	}
	var third []string
	for _, nc := range framework.NodeClaims(t) {
		if nc.Labels[corev1.LabelInstanceTypeStable] == cheapest {
			third = append(third, nc.Name)
		}
	}
	if len(third) != 1 {
		t.Fatalf("%d NodeClaims of %s (%v); want the third launch on it, the cheapest with capacity again", len(third), cheapest, third)
	}
}

// unavailableTTL is the capacity cache's TTL in TestInsufficientCapacity:
// long enough that the second launch, a batch after the first, still finds
// the entries on a loaded machine; short enough to wait for.
const unavailableTTL = 40 * time.Second

// offeringsLogged are the zone/capacity-type of the instance type's
// offerings that the unavailable cache logged with the message.
func offeringsLogged(j *framework.Joiner, message, instanceType string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(j.Logs(), "\n") {
		var l struct {
			Message      string `json:"message"`
			InstanceType string `json:"instance-type"`
			Zone         string `json:"zone"`
			CapacityType string `json:"capacity-type"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == message && l.InstanceType == instanceType {
			out[l.Zone+"/"+l.CapacityType] = true
		}
	}
	return out
}

// fleetTypes are the instance types a logged CreateFleet offered.
func fleetTypes(c fakeaws.Call) []string {
	var out []string
	switch v := c.Params["instanceTypes"].(type) {
	case []string:
		out = v
	case []any:
		for _, s := range v {
			out = append(out, fmt.Sprint(s))
		}
	}
	return out
}
