package provisioning

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkProvisionThousandPods measures, on the local control plane, the
// time from 1,000 pending pods to every NodeClaim they need created, and how
// much of it is the batch window. The pods are made pending first, with no
// NodePool; the clock starts when the NodePool is created.
//
//	go test -run '^$' -bench ProvisionThousandPods -benchtime 1x ./test/provisioning/
func BenchmarkProvisionThousandPods(b *testing.B) {
	for i := 0; i < b.N; i++ {
		j := framework.StartJoiner(b)
		parts := strings.SplitN(framework.PoolAndClass, "---", 2)
		framework.Kubectl(b, parts[0], "apply", "-f", "-")
		shapes := [][2]string{{"250m", "512Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}, {"2", "4Gi"}}
		for k, s := range shapes {
			framework.Kubectl(b, framework.Deployment(fmt.Sprintf("load-%d", k), 250, s[0], s[1], ""), "apply", "-f", "-")
		}
		framework.Eventually(b, 5*time.Minute, "1,000 pods pending", func() (bool, string) {
			var pods corev1.PodList
			if err := framework.Kube.List(context.Background(), &pods, client.InNamespace("default")); err != nil {
				return false, err.Error()
			}
			pending := 0
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && (c.Reason == corev1.PodReasonUnschedulable || c.Status == corev1.ConditionTrue) {
						pending++
					}
				}
			}
			return pending >= 1000, fmt.Sprintf("%d pending", pending)
		})
		start := time.Now()
		framework.Kubectl(b, parts[1], "apply", "-f", "-")
		// Done when the NodeClaims the first batch planned are all created.
		var batchClosed, lastCreated time.Time
		created, planned := 0, 0
		framework.Eventually(b, 5*time.Minute, "the planned NodeClaims created", func() (bool, string) {
			fb := framework.BatchAfter(j.Logs(), start)
			batchClosed, lastCreated, created, planned = fb.Began, fb.LastCreated, fb.Created, fb.Planned
			return planned > 0 && created >= planned, fmt.Sprintf("%d of %d created", created, planned)
		})
		b.ReportMetric(lastCreated.Sub(start).Seconds(), "s-to-all-nodeclaims")
		b.ReportMetric(batchClosed.Sub(start).Seconds(), "s-batch-window")
		b.ReportMetric(lastCreated.Sub(batchClosed).Seconds(), "s-plan-and-create")
		b.ReportMetric(float64(created), "nodeclaims")
		b.StopTimer()
		framework.ResetCluster(b)
		j.Stop(syscall.SIGTERM)
		b.StartTimer()
	}
}
