package aws

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestReservationDeselectedDrifts: a node runs in a reservation its class
// selects; the class's terms change and select it no more, while the
// reservation stays active. The node drifts (CapacityReservationDrift, as
// in Karpenter) and is replaced on-demand; the reservation's instance is
// terminated, and the reservation has its room back.
func TestReservationDeselectedDrifts(t *testing.T) {
	fake.ResetCalls()
	explainBoots(t, fake)
	framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifests, crID := teamReservation(t, fake)
	framework.Kubectl(t, manifests, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("reserved", 1, "500m", "512Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the pod runs on a reserved node", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "reserved"})
		claims := framework.NodeClaims(t)
		if n != 1 || len(claims) != 1 {
			return false, fmt.Sprintf("%d running, %d NodeClaims", n, len(claims))
		}
		return claims[0].Labels[v1.LabelCapacityType] == v1.CapacityTypeReserved, claims[0].Labels[v1.LabelCapacityType]
	})
	first := framework.NodeClaims(t)[0]

	framework.Kubectl(t, "", "patch", "ec2nodeclass", "default", "--type=merge", "-p", `{"spec":{"capacityReservationSelectorTerms":[{"tags":{"team":"nobody"}}]}}`)
	var reason string
	framework.Eventually(t, 4*time.Minute, "the node drifted, replaced on-demand, its instance terminated", func() (bool, string) {
		claims := framework.NodeClaims(t)
		for _, nc := range claims {
			if nc.Name == first.Name {
				if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted); c != nil && c.Status == "True" {
					reason = c.Reason
				}
				return false, fmt.Sprintf("%s still there (drifted: %q)", first.Name, reason)
			}
		}
		n, _ := framework.Running(t, map[string]string{"app": "reserved"})
		state := instances(t)[instanceID(first.Status.ProviderID)]
		return n == 1 && len(claims) == 1 && claims[0].Labels[v1.LabelCapacityType] == v1.CapacityTypeOnDemand && state == "terminated",
			fmt.Sprintf("%d running, %d NodeClaims, old instance %s", n, len(claims), state)
	})
	if reason != "CapacityReservationDrift" {
		t.Errorf("drift reason %q, want CapacityReservationDrift", reason)
	}
	var reservations struct {
		CapacityReservations []struct {
			State                  string
			AvailableInstanceCount int
		}
	}
	out := awsCLIJSON(t, fake, &reservations, "ec2", "describe-capacity-reservations", "--capacity-reservation-ids", crID)
	if len(reservations.CapacityReservations) != 1 || reservations.CapacityReservations[0].State != "active" || reservations.CapacityReservations[0].AvailableInstanceCount != 1 {
		t.Errorf("describe-capacity-reservations: want the reservation active with its room back:\n%s", out)
	}
}
