package framework

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Running counts the Running pods with the label, and where they run.
func Running(t testing.TB, selector map[string]string) (int, map[string]int) {
	var pods corev1.PodList
	if err := Kube.List(context.Background(), &pods, client.InNamespace("default"), client.MatchingLabels(selector)); err != nil {
		t.Fatal(err)
	}
	n, nodes := 0, map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			n++
			nodes[p.Spec.NodeName]++
		}
	}
	return n, nodes
}

// NodeClaims lists every NodeClaim.
func NodeClaims(t testing.TB) []v1.NodeClaim {
	var claims v1.NodeClaimList
	if err := Kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	return claims.Items
}

// FreePort returns a free loopback port.
func FreePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// NodeReady reports the Ready condition.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PoolAndClass is an on-demand c/m/r amd64 NodePool and its EC2NodeClass.
const PoolAndClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`

// Deployment is a pause Deployment labelled app=name.
func Deployment(name string, replicas int, cpu, mem string, extraSpec string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: %[3]s, memory: %[4]s}}}]
%[5]s`, name, replicas, cpu, mem, extraSpec)
}

// WaitEvent waits for a FailedScheduling event with text.
func WaitEvent(t testing.TB, text string) {
	t.Helper()
	Eventually(t, time.Minute, "a FailedScheduling event with "+text, func() (bool, string) {
		out := Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=FailedScheduling", "-o", "custom-columns=MSG:.message")
		return strings.Contains(out, text), TailLines(out, 3)
	})
}

// WantClaims checks that n NodeClaims exist. It does not wait: call it once
// a positive signal shows the provisioner has done its work, such as the
// pods Running or the batch's FailedScheduling event.
func WantClaims(t testing.TB, n int) {
	t.Helper()
	claims := NodeClaims(t)
	if len(claims) != n {
		var names []string
		for _, nc := range claims {
			names = append(names, nc.Name+"/"+nc.Labels["node.kubernetes.io/instance-type"])
		}
		t.Fatalf("%d nodeclaims %v, want %d", len(claims), names, n)
	}
}

// Events returns the messages of the events with reason about the object
// named name (any kind, any namespace), oldest first.
func Events(t testing.TB, reason, name string) []string {
	t.Helper()
	var events corev1.EventList
	if err := Kube.List(context.Background(), &events, client.MatchingFields{"reason": reason, "involvedObject.name": name}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		out = append(out, e.Message)
	}
	return out
}

// WaitForEvent waits for an event with reason about the object named name
// whose message contains text, and returns that message.
func WaitForEvent(t testing.TB, timeout time.Duration, reason, name, text string) string {
	t.Helper()
	var found string
	Eventually(t, timeout, fmt.Sprintf("a %s event on %s with %q", reason, name, text), func() (bool, string) {
		msgs := Events(t, reason, name)
		for _, m := range msgs {
			if strings.Contains(m, text) {
				found = m
				return true, ""
			}
		}
		return false, strings.Join(msgs, " | ")
	})
	return found
}

// Count is how many of the controller's log lines so far carry exactly
// this message.
func (j *Joiner) Count(message string) int {
	return strings.Count(j.Logs(), `"message":"`+message+`"`)
}

// FirstAt is when the controller first logged exactly this message, and
// whether it has.
func (j *Joiner) FirstAt(message string) (time.Time, bool) {
	sc := bufio.NewScanner(strings.NewReader(j.Logs()))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l struct {
			Time    time.Time `json:"time"`
			Message string    `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Message == message {
			return l.Time, true
		}
	}
	return time.Time{}, false
}

// WaitForBatches waits until the provisioner has run n whole batches with
// pending pods after the call. A batch with pending pods logs "found
// provisionable pod(s)" when it has planned them, and batches run one at a
// time, so the n+1th such line after the call shows the nth has finished,
// NodeClaim creations and events included. Pods that stay pending get a
// batch at least every 10 s (the provisioner's resync).
func (j *Joiner) WaitForBatches(t testing.TB, n int) {
	t.Helper()
	const batch = "found provisionable pod(s)"
	from := j.Count(batch)
	Eventually(t, time.Duration(n+1)*30*time.Second, fmt.Sprintf("%d provisioning batches", n), func() (bool, string) {
		got := j.Count(batch) - from
		return got > n, fmt.Sprintf("%d batches begun", got)
	})
}

// Decided reports whether a disruption decision ("disrupting nodeclaim(s)
// ...") has been logged that names any of the nodes or NodeClaims.
func (j *Joiner) Decided(names ...string) bool {
	for _, line := range strings.Split(j.Logs(), "\n") {
		if !strings.Contains(line, `"message":"disrupting nodeclaim(s)`) {
			continue
		}
		for _, name := range names {
			if strings.Contains(line, name) {
				return true
			}
		}
	}
	return false
}

// ReadSeed returns one of the installation guides' manifests.
func ReadSeed(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Cluster.Root, "test", "testdata", "seed-manifests", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Batch is the provisioner's first batch with pending pods after some
// moment, from the controller's log: when its reconcile began (its "found
// provisionable pod(s)" line less the duration it reports), how many
// NodeClaims it planned, and how many were created by when.
type Batch struct {
	Found, Began, LastCreated time.Time
	Planned, Created          int
}

// BatchAfter reads the first batch that began after after from the
// controller's JSON log lines.
func BatchAfter(logs string, after time.Time) Batch {
	var b Batch
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l struct {
			Time     time.Time `json:"time"`
			Message  string    `json:"message"`
			Duration string    `json:"duration"`
			Claims   int       `json:"nodeclaims"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Message {
		case "found provisionable pod(s)":
			d, _ := time.ParseDuration(l.Duration)
			if b.Found.IsZero() && !l.Time.Add(-d).Before(after) {
				b.Found, b.Began = l.Time, l.Time.Add(-d)
			}
		case "computed new nodeclaim(s) to fit pod(s)":
			if !b.Found.IsZero() && b.Planned == 0 {
				b.Planned = l.Claims
			}
		case "created nodeclaim":
			if !b.Found.IsZero() {
				b.Created++
				b.LastCreated = l.Time
			}
		}
	}
	return b
}
