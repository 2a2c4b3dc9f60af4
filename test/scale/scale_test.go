//go:build scale

package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pools are the three NodePools: on-demand 8-CPU nodes for most pods, a
// heavier-weighted spot pool limited to 2,000 CPUs, and a tainted pool for
// the batch apps. Each consolidates 30 s after a change. They start with
// no CPU to launch (limits), so that all 10,000 pods are pending, and
// every pool Ready, when the limits lift (open).
func pools() string {
	pool := func(name, spec, taints, categories, cpus, capacityType string) string {
		return fmt.Sprintf(`---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: %s}
spec:
  limits: {cpu: "0"}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}
%s  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
%s      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [%s]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [%s]}
      - {key: karpenter.k8s.aws/instance-cpu, operator: In, values: [%s]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`, name, spec, taints, capacityType, categories, cpus)
	}
	class := strings.SplitN(framework.PoolAndClass, "---", 2)[0]
	return class +
		pool("general", "", "", "c, m, r", `"8"`, "on-demand") +
		pool("spot", "  weight: 50\n", "", "c, m, r", `"8"`, "spot") +
		pool("batch", "", "      taints: [{key: workload, value: batch, effect: NoSchedule}]\n", "c, m", `"4", "8"`, "on-demand")
}

// open lifts the pools' limits: the spot pool's to 2,000 CPUs, the others'
// out of reach.
var open = map[string]string{"general": "100000", "spot": "2000", "batch": "100000"}

// app is one of the 50 Deployments.
type app struct {
	name, cpu, mem string
	// kind: "spread" apps spread over zones (maxSkew 1), "batch" apps run
	// on the tainted pool only, the others anywhere.
	kind string
}

const (
	apps     = 50
	replicas = 200 // 50 × 200 = 10,000 pods
)

// workload is 50 shapes: seven CPU sizes times four memory ratios, one in
// five zone-spread and one in five batch.
func workload() []app {
	cpus := []int{100, 250, 500, 750, 1000, 1500, 2000}
	ratios := []int{1, 2, 4, 8} // GiB per CPU
	var out []app
	for i := range apps {
		c, r := cpus[i%len(cpus)], ratios[(i/len(cpus))%len(ratios)]
		kind := []string{"spread", "batch", "", "", ""}[i%5]
		out = append(out, app{name: fmt.Sprintf("app-%02d", i), cpu: fmt.Sprintf("%dm", c), mem: fmt.Sprintf("%dMi", c*r*1024/1000), kind: kind})
	}
	return out
}

func (a app) yaml(n int) string {
	extra := ""
	switch a.kind {
	case "spread":
		extra = fmt.Sprintf(`      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: %s}}}
`, a.name)
	case "batch":
		extra = `      nodeSelector: {karpenter.sh/nodepool: batch}
      tolerations: [{key: workload, value: batch, effect: NoSchedule}]
`
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s, workload: scale}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: %[3]s, memory: %[4]s}}}]
%[5]s`, a.name, n, a.cpu, a.mem, extra)
}

// memory samples the controller's resident memory from /proc.
type memory struct {
	mu      sync.Mutex
	samples []memSample
}

type memSample struct {
	at       time.Time
	rss, hwm int64 // KiB
}

func procStatus(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm, sc.Err()
}

func (m *memory) sample(pid int) {
	rss, hwm, err := procStatus(pid)
	if err != nil {
		return
	}
	m.mu.Lock()
	m.samples = append(m.samples, memSample{at: time.Now(), rss: rss, hwm: hwm})
	m.mu.Unlock()
}

// since is the largest resident size sampled from t on, and the last.
func (m *memory) since(t time.Time) (peak, last int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.samples {
		if !s.at.Before(t) {
			peak = max(peak, s.rss)
			last = s.rss
		}
	}
	return peak, last
}

func mib(kib int64) string { return fmt.Sprintf("%.0f MiB", float64(kib)/1024) }

// scalePods counts the workload's pods: all, Running, and those
// kube-scheduler found no node for (which the provisioner plans).
func scalePods(t *testing.T) (all, running, unschedulable int) {
	t.Helper()
	var pods corev1.PodList
	if err := framework.Kube.List(context.Background(), &pods, client.MatchingLabels{"workload": "scale"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		all++
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				unschedulable++
			}
		}
	}
	return all, running, unschedulable
}

// desired is the Deployments' replicas summed.
func desired(t *testing.T) int {
	t.Helper()
	var ds appsv1.DeploymentList
	if err := framework.Kube.List(context.Background(), &ds, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range ds.Items {
		n += int(*d.Spec.Replicas)
	}
	return n
}

func countNodes(t *testing.T) int {
	t.Helper()
	var nodes corev1.NodeList
	if err := framework.Kube.List(context.Background(), &nodes, client.MatchingLabels{"joiner.sh/kwok-instance": "true"}); err != nil {
		t.Fatal(err)
	}
	return len(nodes.Items)
}

// result is what the run measured, written to $SCALE_OUT/scale.json.
type result struct {
	Pods, NodeClaims, Nodes                    int
	BatchWindowSeconds, PlanAndCreateSeconds   float64
	AllNodeClaimsSeconds, AllRunningSeconds    float64
	ChurnMinutes                               float64
	ChurnRounds                                int
	PeakRSSMiB, PeakRSSLast10MinMiB, EndRSSMiB float64
	HWMAfterBurstMiB, HWMEndMiB                float64
	NodeClaimsEnd, NodesEnd, PodsEnd           int
	// NodeClaimsCreated counts every NodeClaim the provisioner created in
	// the run; LaunchTimedOut those deleted unlaunched after LaunchTTL,
	// the sign of pods planned twice.
	NodeClaimsCreated, LaunchTimedOut int
	// MemoryLimitMiB is SCALE_MEMORY_LIMIT, the container limit the chart
	// would pass (the binary keeps Go's memory to 70% of it); 0 for none.
	MemoryLimitMiB float64
	// Scrapes of /metrics, as Prometheus would make them every
	// SCALE_SCRAPE_INTERVAL, and those that failed or took longer than its
	// 10 s timeout; the largest answer and the longest scrape.
	Scrapes, ScrapesFailed int
	ScrapeBytesMax         int64
	ScrapeSecondsMax       float64
}

// scraper reads the controller's /metrics as Prometheus would: a user who
// runs Karpenter's dashboards has it scraped all the time, and a scrape
// holds every series of 10,000 pods in memory while it lasts.
type scraper struct {
	mu              sync.Mutex
	scrapes, failed int
	bytesMax        int64
	secondsMax      float64
}

func (s *scraper) scrape(url string) {
	c := http.Client{Timeout: 10 * time.Second} // Prometheus's default scrape_timeout
	began := time.Now()
	var n int64
	resp, err := c.Get(url)
	if err == nil {
		n, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scrapes++
	if err != nil {
		s.failed++
		return
	}
	s.bytesMax = max(s.bytesMax, n)
	s.secondsMax = max(s.secondsMax, time.Since(began).Seconds())
}

// TestControllerAtScale: 10,000 pending pods of 50 shapes across three
// NodePools (zone spread on ten apps, a tainted pool for ten) become
// NodeClaims in one batch and Running pods on about 1,000 kwok nodes; then
// SCALE_CHURN (default 1h) of churn, four apps rescaled every 30 s, while
// the controller's resident memory is sampled every 10 s and its /metrics
// scraped every SCALE_SCRAPE_INTERVAL (default 30 s). It writes the
// figures to $SCALE_OUT (default a temporary folder) and the log; it
// asserts only that the work got done, never a timing.
func TestControllerAtScale(t *testing.T) {
	churn := time.Hour
	if v := os.Getenv("SCALE_CHURN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SCALE_CHURN=%q: want a duration such as 1h or 10m", v)
		}
		churn = d
	}
	scrapeEvery := 30 * time.Second // kube-prometheus-stack's default interval
	if v := os.Getenv("SCALE_SCRAPE_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			t.Fatalf("SCALE_SCRAPE_INTERVAL=%q: want a duration such as 30s, or 0 for no scrapes", v)
		}
		scrapeEvery = d
	}
	out := os.Getenv("SCALE_OUT")
	if out == "" {
		out = t.TempDir()
	}
	port := framework.FreePort(t)
	env := []string{fmt.Sprintf("METRICS_PORT=%d", port), "ENABLE_PROFILING=true"}
	var res result
	if v := os.Getenv("SCALE_MEMORY_LIMIT"); v != "" {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Value() <= 0 {
			t.Fatalf("SCALE_MEMORY_LIMIT=%q: want a memory quantity such as 300Mi", v)
		}
		// As the chart's downward API passes limits.memory.
		env = append(env, fmt.Sprintf("MEMORY_LIMIT=%d", q.Value()))
		res.MemoryLimitMiB = float64(q.Value()) / (1 << 20)
	}
	j := framework.StartJoiner(t, env...)
	mem := &memory{}
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			mem.sample(j.PID())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	scrapes := &scraper{}
	if scrapeEvery > 0 {
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			tick := time.NewTicker(scrapeEvery)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					scrapes.scrape(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
				}
			}
		}()
	}
	defer func() { close(stop); sampler.Wait() }()

	ws := workload()
	framework.Kubectl(t, pools(), "apply", "-f", "-")
	framework.Kubectl(t, "", "wait", "--for=condition=Ready", "--timeout=2m", "nodepool/general", "nodepool/spot", "nodepool/batch")
	for _, a := range ws {
		framework.Kubectl(t, a.yaml(replicas), "apply", "-f", "-")
	}
	framework.Eventually(t, 10*time.Minute, "10,000 pods unschedulable", func() (bool, string) {
		all, _, unschedulable := scalePods(t)
		return unschedulable >= apps*replicas, fmt.Sprintf("%d pods, %d unschedulable", all, unschedulable)
	})
	start := time.Now()
	for name, cpu := range open {
		framework.Kubectl(t, "", "patch", "nodepool", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"limits":{"cpu":"%s"}}}`, cpu))
	}
	framework.Eventually(t, 10*time.Minute, "the batch's NodeClaims created", func() (bool, string) {
		b := framework.BatchAfter(j.Logs(), start)
		return b.Planned > 0 && b.Created >= b.Planned, fmt.Sprintf("%d of %d created", b.Created, b.Planned)
	})
	b := framework.BatchAfter(j.Logs(), start)
	res.Pods, res.NodeClaims = apps*replicas, b.Created
	res.BatchWindowSeconds = b.Began.Sub(start).Seconds()
	res.PlanAndCreateSeconds = b.LastCreated.Sub(b.Began).Seconds()
	res.AllNodeClaimsSeconds = b.LastCreated.Sub(start).Seconds()
	t.Logf("%d NodeClaims planned in one batch for %d pods, all created %.2f s after the limits lifted (batch window %.2f s, list, plan and create %.2f s)",
		b.Created, res.Pods, res.AllNodeClaimsSeconds, res.BatchWindowSeconds, res.PlanAndCreateSeconds)
	framework.Eventually(t, 30*time.Minute, "10,000 pods running", func() (bool, string) {
		_, running, _ := scalePods(t)
		return running >= apps*replicas, fmt.Sprintf("%d running", running)
	})
	res.AllRunningSeconds = time.Since(start).Seconds()
	res.Nodes = countNodes(t)
	mem.sample(j.PID())
	_, hwm, _ := procStatus(j.PID())
	res.HWMAfterBurstMiB = float64(hwm) / 1024
	t.Logf("all pods running on %d nodes %.0f s after the NodePools; controller peak so far %s", res.Nodes, res.AllRunningSeconds, mib(hwm))

	churnStart := time.Now()
	rng := rand.New(rand.NewSource(20))
	for time.Since(churnStart) < churn {
		for range 4 {
			a := ws[rng.Intn(len(ws))]
			framework.Kubectl(t, "", "scale", "deployment", a.name, fmt.Sprintf("--replicas=%d", replicas/2+rng.Intn(replicas+1)))
		}
		res.ChurnRounds++
		time.Sleep(30 * time.Second) // the churn's pace, not a wait for an outcome
	}
	res.ChurnMinutes = time.Since(churnStart).Minutes()
	framework.Eventually(t, 30*time.Minute, "every replica running after the churn", func() (bool, string) {
		want := desired(t)
		all, running, _ := scalePods(t)
		return running == want && all == want, fmt.Sprintf("%d of %d running, %d pods", running, want, all)
	})
	mem.sample(j.PID())
	peak, last := mem.since(churnStart)
	peak10, _ := mem.since(time.Now().Add(-10 * time.Minute))
	_, hwm, _ = procStatus(j.PID())
	res.PeakRSSMiB, res.PeakRSSLast10MinMiB, res.EndRSSMiB, res.HWMEndMiB = float64(peak)/1024, float64(peak10)/1024, float64(last)/1024, float64(hwm)/1024
	res.NodeClaimsEnd, res.NodesEnd = len(framework.NodeClaims(t)), countNodes(t)
	res.PodsEnd, _, _ = scalePods(t)
	logs := j.Logs()
	res.NodeClaimsCreated = strings.Count(logs, `"message":"created nodeclaim"`)
	res.LaunchTimedOut = strings.Count(logs, `"message":"deleting nodeclaim, launch timed out"`)
	scrapes.mu.Lock()
	res.Scrapes, res.ScrapesFailed, res.ScrapeBytesMax, res.ScrapeSecondsMax = scrapes.scrapes, scrapes.failed, scrapes.bytesMax, scrapes.secondsMax
	scrapes.mu.Unlock()
	if scrapeEvery > 0 && res.Scrapes == res.ScrapesFailed {
		t.Errorf("none of %d scrapes of /metrics succeeded", res.Scrapes)
	}
	t.Logf("after %.0f min of churn (%d rounds): %d pods on %d nodes (%d NodeClaims); resident %s at the end, peak %s during the churn, %s in its last 10 min; VmHWM %s; %d scrapes (%d failed), up to %d bytes and %.2f s",
		res.ChurnMinutes, res.ChurnRounds, res.PodsEnd, res.NodesEnd, res.NodeClaimsEnd, mib(last), mib(peak), mib(peak10), mib(hwm),
		res.Scrapes, res.ScrapesFailed, res.ScrapeBytesMax, res.ScrapeSecondsMax)

	// The heap as the profile sees it, for the notes on what holds memory.
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap", port)); err == nil {
		if f, err := os.Create(filepath.Join(out, "heap.pprof")); err == nil {
			_, _ = io.Copy(f, resp.Body)
			_ = f.Close()
		}
		_ = resp.Body.Close()
	}
	js, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "scale.json"), js, 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("figures in %s:\n%s", out, js)
}
