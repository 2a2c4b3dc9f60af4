//go:build bench

package aws

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// benchPoolAndClass is the guide's EC2NodeClass with a NodePool of one
// instance type, c6a.2xlarge on demand (7,910m allocatable CPU), so that
// pods of 1.5 CPU pack five to an instance and 1,000 pods need 200
// instances, whatever the planner's choice of types would be.
const benchPoolAndClass = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.2xlarge]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 1m}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
`

// benchPods and benchInstances are the benchmark's size; callsGoal is the
// issue's goal for EC2 calls per instance (Karpenter batches CreateFleet and
// DescribeInstances; one CreateTags per instance is left).
const (
	benchPods      = 1000
	benchInstances = 200
	benchLatency   = 50 * time.Millisecond
	callsGoal      = 1.5
)

// TestBenchThousandPods measures 1,000 pending pods becoming 200 EC2
// instances through the aws provider and the local AWS endpoint, with 50 ms
// added to every AWS call: the time from the NodePool's creation (the pods
// wait for it) to every instance running and every pod Running, and the EC2
// calls per instance by action over that time. It runs only with -tags
// bench (make bench-aws); docs/benchmarks.md has the figures.
func TestBenchThousandPods(t *testing.T) {
	framework.ResetCluster(t)
	t.Cleanup(func() {
		// Only the instances that did not join: 200 lines would hide them.
		for _, b := range fake.Boots() {
			if t.Failed() && !b.Joined && b.State == "running" {
				t.Logf("instance %s (%s) did not join: %s", b.InstanceID, b.InstanceType, b.Reason)
			}
		}
	})
	if err := fake.SetFaults(fakeaws.Faults{Latency: fakeaws.Duration{Duration: benchLatency}}); err != nil {
		t.Fatal(err)
	}
	j := framework.StartJoiner(t, awsEnv()...)
	// Registered after StartJoiner's cleanup, so it runs while Joiner still
	// terminates the instances; without the latency, that is quick.
	t.Cleanup(func() {
		_ = fake.SetFaults(fakeaws.Faults{})
		framework.ResetCluster(t)
	})
	pool, class, _ := strings.Cut(benchPoolAndClass, "---")
	framework.Kubectl(t, class, "apply", "-f", "-")
	ctx := context.Background()
	framework.Eventually(t, 2*time.Minute, "the EC2NodeClass is Ready", func() (bool, string) {
		nc := &awsv1.EC2NodeClass{}
		if err := framework.Kube.Get(ctx, types.NamespacedName{Name: "default"}, nc); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(nc.Status.Conditions, "Ready"), fmt.Sprint(nc.Status.Conditions)
	})
	// The pods wait without a NodePool, so that they make one provisioning
	// batch: created with the NodePool present, they arrive over several
	// seconds (the ReplicaSet controller's slow start) and partial batches
	// add a few half-empty instances.
	framework.Kubectl(t, framework.Deployment("bench", benchPods, "1500m", "1536Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, 5*time.Minute, "1,000 pods pending", func() (bool, string) {
		n := unschedulable(t)
		return n == benchPods, fmt.Sprintf("%d unschedulable", n)
	})

	fake.ResetCalls()
	start := time.Now()
	framework.Kubectl(t, pool, "apply", "-f", "-")
	moto := motoEC2(t)
	var instancesRunning, podsRunning time.Time
	framework.Eventually(t, 15*time.Minute, "every instance and pod running", func() (bool, string) {
		launched := launchedSince(fake.Calls("ec2", "CreateFleet"))
		if instancesRunning.IsZero() && len(launched) >= benchInstances && countRunning(t, moto, launched) >= benchInstances {
			instancesRunning = time.Now()
		}
		n, _ := framework.Running(t, map[string]string{"app": "bench"})
		if podsRunning.IsZero() && n == benchPods {
			podsRunning = time.Now()
		}
		return !instancesRunning.IsZero() && !podsRunning.IsZero(), fmt.Sprintf("%d instances launched, %d pods running", len(launched), n)
	})
	calls := fake.Calls("ec2", "")

	launched := launchedSince(fake.Calls("ec2", "CreateFleet"))
	claims := framework.NodeClaims(t)
	if len(launched) != benchInstances || len(claims) != benchInstances {
		t.Errorf("%d instances launched and %d NodeClaims, want %d of each", len(launched), len(claims), benchInstances)
		_, perNode := framework.Running(t, map[string]string{"app": "bench"})
		shape := map[string]int{}
		var nodes corev1.NodeList
		if err := framework.Kube.List(ctx, &nodes); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			shape[fmt.Sprintf("%d pods on allocatable cpu %s", perNode[n.Name], n.Status.Allocatable.Cpu())]++
		}
		t.Logf("nodes by bench pods and allocatable: %v", shape)
	}
	byAction := map[string]int{}
	for _, c := range calls {
		byAction[c.Action]++
	}
	actions := make([]string, 0, len(byAction))
	for a := range byAction {
		actions = append(actions, a)
	}
	sort.Slice(actions, func(i, k int) bool {
		if byAction[actions[i]] != byAction[actions[k]] {
			return byAction[actions[i]] > byAction[actions[k]]
		}
		return actions[i] < actions[k]
	})
	var lines []string
	for _, a := range actions {
		lines = append(lines, fmt.Sprintf("  %-32s %5d  %.3f per instance", a, byAction[a], float64(byAction[a])/float64(len(launched))))
	}
	perInstance := float64(len(calls)) / float64(len(launched))
	fleetSizes := []string{}
	for _, c := range fake.Calls("ec2", "CreateFleet") {
		fleetSizes = append(fleetSizes, fmt.Sprint(len(c.Instances)))
	}
	t.Logf("pods %d, instances %d, NodeClaims %d, latency %s per call", benchPods, len(launched), len(claims), benchLatency)
	t.Logf("NodePool created -> all instances running: %.1f s", instancesRunning.Sub(start).Seconds())
	t.Logf("NodePool created -> all pods Running:      %.1f s", podsRunning.Sub(start).Seconds())
	t.Logf("NodePool created -> last NodeClaim created: %s", sinceLog(j.Logs(), "created nodeclaim", start))
	t.Logf("NodePool created -> last NodeClaim launched: %s", sinceLog(j.Logs(), "launched nodeclaim", start))
	t.Logf("NodePool created -> last NodeClaim registered: %s", sinceLog(j.Logs(), "registered nodeclaim", start))
	t.Logf("NodePool created -> last NodeClaim initialized: %s", sinceLog(j.Logs(), "initialized nodeclaim", start))
	t.Logf("instances per CreateFleet call: %s", strings.Join(fleetSizes, " "))
	t.Logf("EC2 calls: %d, %.3f per instance (goal < %.1f)\n%s", len(calls), perInstance, callsGoal, strings.Join(lines, "\n"))
	if perInstance >= callsGoal {
		t.Errorf("%.3f EC2 calls per instance, goal < %.1f", perInstance, callsGoal)
	}
}

// unschedulable counts the default namespace's pods kube-scheduler has
// found no node for.
func unschedulable(t testing.TB) int {
	var pods corev1.PodList
	if err := framework.Kube.List(context.Background(), &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				n++
			}
		}
	}
	return n
}

// launchedSince lists the instances the fleet calls launched.
func launchedSince(fleets []fakeaws.Call) []string {
	var out []string
	for _, c := range fleets {
		out = append(out, c.Instances...)
	}
	return out
}

// motoEC2 talks to moto directly, so the benchmark's own polling is neither
// delayed nor counted in the front's call log.
func motoEC2(t testing.TB) *ec2.Client {
	cfg := clientConfig(t, fake.MotoURL(), region)
	return ec2.NewFromConfig(cfg)
}

func countRunning(t testing.TB, c *ec2.Client, ids []string) int {
	n := 0
	pager := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{InstanceIds: ids})
	for pager.HasMorePages() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				if i.State != nil && i.State.Name == "running" {
					n++
				}
			}
		}
	}
	return n
}

// sinceLog is the time from start to the last log line with the message.
func sinceLog(logs, message string, start time.Time) string {
	var last time.Time
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, `"message":"`+message+`"`) {
			continue
		}
		i := strings.Index(l, `"time":"`)
		if i < 0 {
			continue
		}
		rest := l[i+len(`"time":"`):]
		if ts, err := time.Parse(time.RFC3339Nano, rest[:strings.IndexByte(rest, '"')]); err == nil {
			last = ts
		}
	}
	if last.IsZero() {
		return "not logged"
	}
	return fmt.Sprintf("%.1f s", last.Sub(start).Seconds())
}
