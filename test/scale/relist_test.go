//go:build scale

package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// relistTrigger ends an informer's watch when fired, the way the API server
// ended the pod informer's in scale run 9: the watch in progress stops and
// the next one closes at once, a "very short watch", after which the
// reflector lists every pod again. done closes at the watch that follows
// that list, once the reflector has handed it to the informer's queue.
type relistTrigger struct {
	mu      sync.Mutex
	current watch.Interface
	armed   bool
	short   bool // the watch that closes at once was handed out
	done    chan struct{}
}

func (r *relistTrigger) wrap(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	inner := toolscache.ToListerWatcherWithContext(lw)
	return &toolscache.ListWatch{
		ListWithContextFunc: inner.ListWithContext,
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.SendInitialEvents != nil {
				// The streaming list, which kube-apiserver 1.33 refuses.
				return inner.WatchWithContext(ctx, opts)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			switch {
			case r.armed && !r.short:
				r.short = true
				return watch.NewEmptyWatch(), nil
			case r.short:
				select {
				case <-r.done:
				default:
					close(r.done)
				}
			}
			w, err := inner.WatchWithContext(ctx, opts)
			r.current = w
			return w, err
		},
	}
}

func (r *relistTrigger) fire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = true
	r.current.Stop()
}

// relistRun is one relist's cost.
type relistRun struct {
	Mode string `json:"mode"`
	Pods int    `json:"pods"`
	// ResidentBeforeMiB is the test process after the first list, collected.
	ResidentBeforeMiB float64 `json:"residentBeforeMiB"`
	// PeakRiseMiB is the kernel's high-water mark during the relist above
	// ResidentBeforeMiB.
	PeakRiseMiB float64 `json:"peakRiseMiB"`
	// LiveRiseMiB is the largest live heap a collection found during the
	// relist, above the live heap before it.
	LiveRiseMiB float64 `json:"liveRiseMiB"`
	Seconds     float64 `json:"seconds"`
}

// TestRelistMemory measures what a pod informer holds while it lists
// 10,000 pods again after the API server ends its watch (scale run 9's one
// moment over 300 MiB), with client-go's own relist and with the
// controller's (operator.CacheOptions: paged, each page trimmed, each pod the
// cache holds at the same resource version kept as it is), three
// times each, alternating. The informer runs in this process with the
// controller's cache options and the collector at GOGC=10, so that the
// peaks follow what is live rather than the collector's pacing. Figures go
// to $SCALE_OUT/relist.json and docs/benchmarks.md §7; nothing is asserted
// of them.
func TestRelistMemory(t *testing.T) {
	ctx := context.Background()
	// The informers' own log lines (the ended watch) are not measured here.
	ctrllog.SetLogger(logr.Discard())
	framework.Kubectl(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: relist}\n", "apply", "-f", "-")
	for _, a := range workload() {
		framework.Kubectl(t, a.yaml(replicas), "apply", "-n", "relist", "-f", "-")
	}
	want := apps * replicas
	framework.Eventually(t, 10*time.Minute, fmt.Sprintf("%d pods, each marked unschedulable", want), func() (bool, string) {
		var pods corev1.PodList
		if err := framework.Kube.List(ctx, &pods, client.InNamespace("relist")); err != nil {
			return false, err.Error()
		}
		marked := 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					marked++
				}
			}
		}
		return len(pods.Items) == want && marked == want, fmt.Sprintf("%d pods, %d marked", len(pods.Items), marked)
	})

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	var runs []relistRun
	for range 3 {
		for _, mode := range []string{"client-go's relist, whole", "paged and trimmed, held pods kept (operator.CacheOptions)"} {
			opts := operator.CacheOptions()
			if mode[0] == 'c' {
				opts.NewInformer = nil // controller-runtime's default
			}
			run := measureRelist(t, opts)
			run.Mode = mode
			t.Logf("%s: %d pods, resident %.0f MiB before, high-water mark +%.1f MiB, live heap +%.1f MiB, %.2f s",
				mode, run.Pods, run.ResidentBeforeMiB, run.PeakRiseMiB, run.LiveRiseMiB, run.Seconds)
			runs = append(runs, run)
		}
	}
	out := os.Getenv("SCALE_OUT")
	if out == "" {
		out = t.TempDir()
	}
	b, _ := json.MarshalIndent(runs, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "relist.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func measureRelist(t *testing.T, opts cache.Options) relistRun {
	t.Helper()
	trigger := &relistTrigger{done: make(chan struct{})}
	newInformer := opts.NewInformer
	if newInformer == nil {
		newInformer = toolscache.NewSharedIndexInformer
	}
	opts.NewInformer = func(lw toolscache.ListerWatcher, obj k8sruntime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
		return newInformer(trigger.wrap(lw), obj, resync, idx)
	}
	opts.Scheme = clientgoscheme.Scheme
	opts.DefaultNamespaces = map[string]cache.Config{"relist": {}}
	c, err := cache.New(framework.Cluster.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.GetInformer(ctx, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the pod cache did not sync")
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	debug.FreeOSMemory()
	liveBefore := liveHeap()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the high-water mark: %v", err)
	}
	before, _, err := procStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	peakLive := make(chan uint64)
	go func() {
		var peak uint64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				peakLive <- peak
				return
			case <-tick.C:
				peak = max(peak, liveHeap())
			}
		}
	}()
	start := time.Now()
	trigger.fire()
	select {
	case <-trigger.done:
	case <-time.After(5 * time.Minute):
		t.Fatal("the informer did not relist")
	}
	took := time.Since(start)
	close(stop)
	peak := <-peakLive
	_, hwm, err := procStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return relistRun{
		Pods:              len(pods.Items),
		ResidentBeforeMiB: float64(before) / 1024,
		PeakRiseMiB:       float64(hwm-before) / 1024,
		LiveRiseMiB:       (float64(peak) - float64(liveBefore)) / (1 << 20),
		Seconds:           took.Seconds(),
	}
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
