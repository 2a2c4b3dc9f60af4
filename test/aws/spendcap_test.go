package aws

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestSpendCap: a pool of on-demand m5.large capped at $2/h receives 100
// pods that need about 34 nodes ($3.26/h). Sampled every 2 s, what its
// NodeClaims cost (counted here at the catalog's list price, and as
// karpenter_nodepools_cost_total gives it) never exceeds $2/h; the pods
// left pending are told the cap stopped them; raising the cap to $4/h
// lets every pod run, still under the new cap.
func TestSpendCap(t *testing.T) {
	f := startFake(t, false)
	framework.ResetCluster(t)
	port := framework.FreePort(t)
	j := framework.StartJoiner(t, awsEnv("AWS_ENDPOINT_URL="+f.URL(), fmt.Sprintf("METRICS_PORT=%d", port))...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifest := strings.Replace(framework.PoolAndClass, "      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}",
		"      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}", 1)
	manifest = strings.Replace(manifest, "metadata: {name: default}\nspec:\n  template:",
		"metadata: {name: default, annotations: {"+spendcap.Annotation+": \"2\"}}\nspec:\n  template:", 1)
	if !strings.Contains(manifest, spendcap.Annotation) || !strings.Contains(manifest, "[m5.large]") {
		t.Fatalf("the manifest was not edited:\n%s", manifest)
	}

	s := &costSampler{port: port, capDollars: 2}
	stop := s.start()
	defer stop()
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 100, "500m", "1Gi", ""), "apply", "-f", "-")
	framework.WaitEvent(t, spendcap.Annotation)
	// The pool fills its cap: 20 m5.large ($1.92/h), a 21st would be $2.016.
	framework.Eventually(t, 3*time.Minute, "20 m5.large NodeClaims under the $2/h cap", func() (bool, string) {
		n := len(framework.NodeClaims(t))
		return n == 20, fmt.Sprintf("%d NodeClaims", n)
	})
	// A later batch, which must not launch: the cap is named again.
	batches := j.Count("found provisionable pod(s)")
	framework.Eventually(t, time.Minute, "another batch after the pool reached its cap", func() (bool, string) {
		return j.Count("found provisionable pod(s)") > batches, ""
	})
	if n := len(framework.NodeClaims(t)); n != 20 {
		t.Fatalf("%d NodeClaims after the pool reached its cap, want 20", n)
	}
	running, _ := framework.Running(t, map[string]string{"app": "web"})
	if running == 100 {
		t.Fatal("every pod runs under a cap that cannot hold them")
	}
	msg := framework.Kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "reason=FailedScheduling", "-o", "custom-columns=MSG:.message")
	t.Logf("%d pods run under the cap; a pending pod's event: %s", running, framework.TailLines(msg, 1))

	s.setCap(4)
	framework.Kubectl(t, "", "annotate", "--overwrite", "nodepool/default", spendcap.Annotation+"=4")
	framework.Eventually(t, 4*time.Minute, "100 pods run once the cap is $4/h", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "web"})
		return n == 100, fmt.Sprintf("%d running", n)
	})
	stop()
	if errs := s.violations(); len(errs) > 0 {
		t.Fatalf("over the cap:\n%s", strings.Join(errs, "\n"))
	}
	if s.samples < 10 || s.scraped < 10 {
		t.Fatalf("only %d samples of the NodeClaims and %d scrapes", s.samples, s.scraped)
	}
	t.Logf("%d samples, %d scrapes; at most $%.4f/h counted, $%.4f/h scraped", s.samples, s.scraped, s.maxCounted, s.maxScraped)
}

// costSampler samples the pool's cost every 2 s, counting its NodeClaims
// at m5.large's list price and scraping karpenter_nodepools_cost_total,
// and records every sample over the cap in force.
type costSampler struct {
	port int

	mu                     sync.Mutex
	capDollars             float64
	errs                   []string
	samples, scraped       int
	maxCounted, maxScraped float64
}

func (s *costSampler) setCap(dollars float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capDollars = dollars
}

func (s *costSampler) violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs
}

// start samples until the returned func is called (which may be called
// twice).
func (s *costSampler) start() func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func (s *costSampler) sample() {
	var claims v1.NodeClaimList
	counted := -1.0
	if framework.Kube.List(context.Background(), &claims) == nil {
		counted = 0
		for range claims.Items {
			// Every NodeClaim counts, launched or not: the cap holds what
			// the pool may be billed for.
			counted += listM5Large
		}
	}
	scraped, ok := scrapeGauge(s.port, "karpenter_nodepools_cost_total", map[string]string{"nodepool": "default"})
	s.mu.Lock()
	defer s.mu.Unlock()
	if counted >= 0 {
		s.samples++
		s.maxCounted = max(s.maxCounted, counted)
		if counted > s.capDollars+1e-9 {
			s.errs = append(s.errs, fmt.Sprintf("%s: %d NodeClaims cost $%.4f/h, over the $%.2f/h cap", time.Now().Format(time.TimeOnly), len(claims.Items), counted, s.capDollars))
		}
	}
	if ok {
		s.scraped++
		s.maxScraped = max(s.maxScraped, scraped)
		if scraped > s.capDollars+1e-9 {
			s.errs = append(s.errs, fmt.Sprintf("%s: karpenter_nodepools_cost_total %.4f, over the $%.2f/h cap", time.Now().Format(time.TimeOnly), scraped, s.capDollars))
		}
	}
}

// scrapeGauge reads the sum of a family's series with these labels from
// the controller's /metrics, and whether the scrape served the family.
func scrapeGauge(port int, family string, labels map[string]string) (float64, bool) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, false
	}
	f := families[family]
	if f == nil {
		return 0, false
	}
	return sumOf(f, labels), true
}
