package provisioning

import (
	"bufio"
	"context"
	"encoding/json"
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
		var allPending time.Time
		deadline := time.Now().Add(5 * time.Minute)
		for time.Now().Before(deadline) {
			var pods corev1.PodList
			if err := framework.Kube.List(context.Background(), &pods, client.InNamespace("default")); err != nil {
				b.Fatal(err)
			}
			pending, latest := 0, time.Time{}
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && (c.Reason == corev1.PodReasonUnschedulable || c.Status == corev1.ConditionTrue) {
						pending++
						if c.LastTransitionTime.After(latest) {
							latest = c.LastTransitionTime.Time
						}
					}
				}
			}
			if pending >= 1000 {
				allPending = latest
				break
			}
			_ = latest
			time.Sleep(200 * time.Millisecond)
		}
		if allPending.IsZero() {
			b.Fatal("pods never all became pending")
		}
		start := time.Now()
		framework.Kubectl(b, parts[1], "apply", "-f", "-")
		var batchClosed, lastCreated time.Time
		created := 0
		for time.Now().Before(deadline) {
			_, batchClosed, lastCreated, created = parseTimes(j.Logs())
			if created > 0 && time.Since(lastCreated) > 3*time.Second {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if created == 0 {
			b.Fatal("no nodeclaims created")
		}
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

// parseTimes reads the first batch's close and the last NodeClaim creation
// from the controller's JSON logs.
func parseTimes(logs string) (found, batchClosed, lastCreated time.Time, created int) {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var l struct {
			Time     time.Time `json:"time"`
			Message  string    `json:"message"`
			Duration string    `json:"duration"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Message {
		case "found provisionable pod(s)":
			if found.IsZero() {
				found = l.Time
				d, _ := time.ParseDuration(l.Duration)
				batchClosed = l.Time.Add(-d)
			}
		case "created nodeclaim":
			created++
			lastCreated = l.Time
		}
	}
	return
}
