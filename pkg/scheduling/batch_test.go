package scheduling

import (
	"fmt"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestAffinityToPodsOfTheSameBatch: a Deployment whose pods require
// affinity to another Deployment's pods, both pending in one batch, is
// placed with them whichever group the solver takes first (groups go
// largest first, so the sizes set the order).
func TestAffinityToPodsOfTheSameBatch(t *testing.T) {
	for _, key := range []string{corev1.LabelHostname, corev1.LabelTopologyZone} {
		for _, order := range []struct {
			name          string
			webCPU, dbCPU string
			webN, dbN     int
		}{
			{name: "dependents first", webCPU: "2", dbCPU: "500m", webN: 6, dbN: 3},
			{name: "targets first", webCPU: "500m", dbCPU: "2", webN: 6, dbN: 3},
		} {
			t.Run(fmt.Sprintf("%s affinity, %s", key, order.name), func(t *testing.T) {
				pods := append(
					replicas(order.webN, "web", order.webCPU, "1Gi", withLabels("app", "web"), podAffinity(key, map[string]string{"app": "db"})),
					replicas(order.dbN, "db", order.dbCPU, "1Gi", withLabels("app", "db"))...)
				plan := solve(t, []*v1.NodePool{onDemandPool("default")}, pods)
				if len(plan.Unschedulable) > 0 {
					t.Fatalf("unschedulable:\n%s", summary(plan))
				}
				// Every web pod shares its node (hostname) or zone with a db pod.
				domains := map[string]bool{}
				placed := 0
				for i, nc := range plan.NewNodeClaims {
					domain := fmt.Sprint(i)
					if key == corev1.LabelTopologyZone {
						zones := nc.Requirements[corev1.LabelTopologyZone].Values()
						if len(zones) != 1 {
							continue
						}
						domain = zones[0]
					}
					for _, p := range nc.Pods {
						if p.Labels["app"] == "db" {
							domains[domain] = true
						}
					}
				}
				for i, nc := range plan.NewNodeClaims {
					domain := fmt.Sprint(i)
					if key == corev1.LabelTopologyZone {
						zones := nc.Requirements[corev1.LabelTopologyZone].Values()
						if len(zones) != 1 {
							domain = ""
						} else {
							domain = zones[0]
						}
					}
					for _, p := range nc.Pods {
						placed++
						if p.Labels["app"] == "web" && !domains[domain] {
							t.Errorf("web pod %s on %s/%s, with no db pod in its %s", p.Name, nc.InstanceType.Name, nc.Offering.Zone, key)
						}
					}
				}
				if placed != order.webN+order.dbN {
					t.Fatalf("%d pods placed:\n%s", placed, summary(plan))
				}
			})
		}
	}
}

// TestAffinityWaitsOnlyForWhatMayCome: a group whose affinity targets never
// appear is reported with its reason once no pass makes progress, and the
// other pods are placed.
func TestAffinityWaitsOnlyForWhatMayCome(t *testing.T) {
	pods := append(replicas(2, "web", "1", "1Gi", withLabels("app", "web"), podAffinity(corev1.LabelTopologyZone, map[string]string{"app": "missing"})),
		replicas(3, "db", "1", "1Gi", withLabels("app", "db"))...)
	plan := solve(t, []*v1.NodePool{onDemandPool("default")}, pods)
	wantUnschedulable(2, "no pod matches")(t, plan)
	placed := 0
	for _, nc := range plan.NewNodeClaims {
		placed += len(nc.Pods)
	}
	if placed != 3 {
		t.Fatalf("%d placed:\n%s", placed, summary(plan))
	}
}
