package provisioning

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestRuntimeSettings: the chart's CPU_REQUESTS and MEMORY_LIMIT reach the
// Go runtime of the running controller, as its own metrics report them:
// GOMAXPROCS is the CPU request rounded up to whole CPUs, the memory limit
// 70% of the container's; an explicit GOMAXPROCS or GOMEMLIMIT wins.
func TestRuntimeSettings(t *testing.T) {
	cases := []struct {
		name       string
		env        []string
		maxprocs   float64
		memlimitMB float64 // bytes / 1e6, rounded down
	}{
		{name: "a 3.5 CPU request and a 300 MiB limit", env: []string{"GOMAXPROCS=", "GOMEMLIMIT=", "CPU_REQUESTS=3500", "MEMORY_LIMIT=314572800"},
			maxprocs: 4, memlimitMB: 220},
		{name: "a 500m request and a 1 GiB limit", env: []string{"GOMAXPROCS=", "GOMEMLIMIT=", "CPU_REQUESTS=500", "MEMORY_LIMIT=1073741824"},
			maxprocs: 1, memlimitMB: 751},
		{name: "an explicit GOMAXPROCS and GOMEMLIMIT win", env: []string{"GOMAXPROCS=3", "GOMEMLIMIT=100MiB", "CPU_REQUESTS=1000", "MEMORY_LIMIT=314572800"},
			maxprocs: 3, memlimitMB: 104},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			port := framework.FreePort(t)
			framework.StartJoiner(t, append(tc.env, fmt.Sprintf("METRICS_PORT=%d", port))...)
			framework.Eventually(t, time.Minute, "the runtime's metrics", func() (bool, string) {
				resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
				if err != nil {
					return false, err.Error()
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				procs, okProcs := sample(string(body), "go_sched_gomaxprocs_threads")
				limit, okLimit := sample(string(body), "go_gc_gomemlimit_bytes")
				if !okProcs || !okLimit {
					return false, "no go_sched_gomaxprocs_threads or go_gc_gomemlimit_bytes yet"
				}
				if procs != tc.maxprocs || float64(int64(limit/1e6)) != tc.memlimitMB {
					t.Fatalf("GOMAXPROCS %v and memory limit %v bytes, want %v and %v MB", procs, limit, tc.maxprocs, tc.memlimitMB)
				}
				return true, ""
			})
		})
	}
}

// sample is the value of an unlabelled metric in a Prometheus text page.
func sample(page, name string) (float64, bool) {
	for _, l := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}
