package aws

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/api/meta"
)

// TestOpenReservation: an open On-Demand Capacity Reservation (awscli's
// default match criteria) of m5.large in us-east-1a, and a pool of
// on-demand m5.large there. With the ReservedCapacity gate on, as in
// Karpenter, the launch opts out of open reservations: the instance is not
// in it. With the gate off, EC2 puts the instance in it, and Joiner labels
// it on-demand all the same, as Karpenter does: labelled reserved, it would
// no longer meet its on-demand pool, drift, and be replaced in a loop.
func TestOpenReservation(t *testing.T) {
	for _, tc := range []struct {
		gate          string
		inReservation bool
	}{
		{gate: "ReservedCapacity=true", inReservation: false},
		{gate: "ReservedCapacity=false", inReservation: true},
	} {
		t.Run(tc.gate, func(t *testing.T) {
			framework.StartJoiner(t, awsEnv("FEATURE_GATES="+tc.gate)...)
			t.Cleanup(func() { framework.ResetCluster(t) })
			var created struct {
				CapacityReservation struct{ CapacityReservationId string }
			}
			out := awsCLIJSON(t, fake, &created, "ec2", "create-capacity-reservation", "--instance-type", "m5.large", "--instance-platform", "Linux/UNIX",
				"--availability-zone", "us-east-1a", "--instance-count", "1")
			crID := created.CapacityReservation.CapacityReservationId
			if crID == "" {
				t.Fatalf("create-capacity-reservation:\n%s", out)
			}
			t.Cleanup(func() { awsCLI(t, fake, "ec2", "cancel-capacity-reservation", "--capacity-reservation-id", crID) })
			manifests := strings.Replace(framework.PoolAndClass, "      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n",
				"      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}\n      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}\n", 1)
			manifests = strings.Replace(manifests, "  template:\n", "  disruption: {consolidateAfter: 1s}\n  template:\n", 1)
			framework.Kubectl(t, manifests, "apply", "-f", "-")
			framework.Kubectl(t, framework.Deployment("open", 1, "500m", "512Mi", ""), "apply", "-f", "-")
			// Consolidatable shows the disruption conditions were judged
			// (drift among them) after the launch.
			framework.Eventually(t, 3*time.Minute, "the pod runs on a node whose conditions were judged", func() (bool, string) {
				n, _ := framework.Running(t, map[string]string{"app": "open"})
				claims := framework.NodeClaims(t)
				if n != 1 || len(claims) != 1 {
					return false, fmt.Sprintf("%d running, %d NodeClaims", n, len(claims))
				}
				return meta.IsStatusConditionTrue(claims[0].Status.Conditions, v1.ConditionTypeConsolidatable), "not yet consolidatable"
			})
			nc := framework.NodeClaims(t)[0]
			if ct := nc.Labels[v1.LabelCapacityType]; ct != v1.CapacityTypeOnDemand {
				t.Errorf("the NodeClaim is %s, want on-demand", ct)
			}
			if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted) {
				t.Errorf("the NodeClaim drifted: %+v", meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted))
			}
			var described struct {
				Reservations []struct {
					Instances []struct{ CapacityReservationId string }
				}
			}
			out = awsCLIJSON(t, fake, &described, "ec2", "describe-instances", "--instance-ids", instanceID(nc.Status.ProviderID))
			if len(described.Reservations) != 1 || len(described.Reservations[0].Instances) != 1 {
				t.Fatalf("describe-instances:\n%s", out)
			}
			if in := described.Reservations[0].Instances[0].CapacityReservationId == crID; in != tc.inReservation {
				t.Errorf("the instance in the open reservation: %v, want %v:\n%s", in, tc.inReservation, out)
			}
		})
	}
}
