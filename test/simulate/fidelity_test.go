//go:build fidelity

package simulate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/simulate"
	"github.com/joiner-autoscaler/joiner/test/framework"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// compress is how much faster than the trace the live run goes: a 2-hour
// trace in 20 minutes, consolidateAfter 1m becoming 10s, as the
// integration tests shorten it.
const compress = 6

// TestFidelity replays a generated 2-hour random walk of 20 Deployments
// (peak 150 pods), compressed, live and in the simulator, and reports
// node-hours, cost, evictions and the peak node count of both. It fails
// only when the live run could not be measured; the comparison is a
// figure for docs/simulate.md, not an assertion.
func TestFidelity(t *testing.T) {
	pool := framework.PoolWith("10s", "Never")
	objs, err := manifests.Parse("pool", strings.NewReader(pool))
	if err != nil {
		t.Fatal(err)
	}
	full, added, err := simulate.Generate("walk", objs, 150, 2*time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	trace := &simulate.Trace{Duration: full.Duration}
	trace.Duration.Duration /= compress
	for _, e := range full.Events {
		e.At.Duration /= compress
		trace.Events = append(trace.Events, e)
	}
	var docs []string
	for _, obj := range added {
		raw, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(raw))
	}
	framework.Kubectl(t, pool+"\n---\n"+strings.Join(docs, "---\n"), "apply", "-f", "-")
	j := framework.StartJoiner(t)
	live := replay(t, trace)
	t.Logf("live: %+v", live)

	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	timing := simulate.DefaultTiming()
	timing.Launch, timing.Initialize, timing.Drain, timing.Sample = live.launch, 0, live.drain, 5*time.Second
	res, err := simulate.Run(simulate.Config{Name: "simulated", Objects: objs, InstanceTypes: its, Timing: timing}, trace, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	rows := []struct {
		what       string
		live, simd float64
	}{
		{"node-hours (trace time)", live.nodeHours * compress, s.NodeHours * compress},
		{"cost, $ (trace time)", live.cost * compress, s.TotalCost * compress},
		{"evictions", float64(live.evictions), float64(s.Evictions)},
		{"peak nodes", float64(live.peak), float64(s.PeakNodes)},
		{"nodes launched", float64(live.launched), float64(s.NodesLaunched)},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "| figure | live | simulated | simulated ÷ live |\n|---|---:|---:|---:|\n")
	for _, r := range rows {
		ratio := "—"
		if r.live > 0 {
			ratio = fmt.Sprintf("%.3f", r.simd/r.live)
		}
		fmt.Fprintf(&out, "| %s | %.2f | %.2f | %s |\n", r.what, r.live, r.simd, ratio)
	}
	fmt.Fprintf(&out, "\nLive, on average: launch to initialized %s over %d NodeClaims, deletion to gone %s over %d (the simulator's launch and drain delays).\n",
		live.launch.Round(10*time.Millisecond), live.launched, live.drain.Round(10*time.Millisecond), live.deleted)
	fmt.Fprintf(&out, "Disruption commands: %d live, %d simulated.\n", strings.Count(j.Logs(), `"message":"disrupting nodeclaim(s) via `), len(res.Decisions))
	t.Logf("\n%s", out.String())
	if dir := os.Getenv("FIDELITY_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "fidelity.md"), []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if live.launched == 0 {
		t.Fatal("the live run launched no node")
	}
}

type liveFigures struct {
	nodeHours, cost float64
	evictions, peak int
	launched        int
	launch          time.Duration
	// drain is the mean time from a NodeClaim's deletion to its being
	// gone, over deleted of them.
	drain   time.Duration
	deleted int
}

// replay scales the Deployments as the trace says, at its times, while
// sampling the NodeClaims every second, and measures the run.
func replay(t *testing.T, trace *simulate.Trace) liveFigures {
	ctx := context.Background()
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	price := map[string]float64{}
	for _, it := range its {
		for _, o := range it.Offerings {
			price[it.Name+"/"+o.Zone+"/"+o.CapacityType] = o.Price
		}
	}
	type seen struct {
		created, gone, initialized, deleting time.Time
		price                                float64
	}
	claims := map[string]*seen{}
	var f liveFigures
	start := time.Now()
	end := start.Add(trace.Duration.Duration)
	next := 0
	for now := time.Now(); now.Before(end); now = time.Now() {
		for next < len(trace.Events) && !start.Add(trace.Events[next].At.Duration).After(now) {
			sc := trace.Events[next].Scale
			next++
			if sc == nil {
				continue
			}
			ns, name, _ := strings.Cut(sc.Deployment, "/")
			patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, sc.Replicas))
			d := &appsv1.Deployment{}
			d.Namespace, d.Name = ns, name
			if err := framework.Kube.Patch(ctx, d, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Fatalf("scaling %s: %v", sc.Deployment, err)
			}
		}
		var list v1.NodeClaimList
		if err := framework.Kube.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		present := map[string]bool{}
		for _, nc := range list.Items {
			present[nc.Name] = true
			s := claims[nc.Name]
			if s == nil {
				s = &seen{created: nc.CreationTimestamp.Time}
				claims[nc.Name] = s
			}
			if p, ok := price[nc.Labels[corev1.LabelInstanceTypeStable]+"/"+nc.Labels[corev1.LabelTopologyZone]+"/"+nc.Labels[v1.LabelCapacityType]]; ok {
				s.price = p
			}
			if nc.DeletionTimestamp != nil && s.deleting.IsZero() {
				s.deleting = now
			}
			if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized); c != nil && c.Status == "True" {
				s.initialized = c.LastTransitionTime.Time
			}
		}
		live := 0
		for name, s := range claims {
			if !present[name] && s.gone.IsZero() {
				s.gone = now
			}
			if s.gone.IsZero() {
				live++
			}
		}
		if live > f.peak {
			f.peak = live
		}
		time.Sleep(time.Second) // the sampling interval, not a wait for an outcome
	}
	var launches []time.Duration
	var drains time.Duration
	for _, s := range claims {
		if !s.deleting.IsZero() && !s.gone.IsZero() {
			drains += s.gone.Sub(s.deleting)
			f.deleted++
		}
		stop := s.gone
		if stop.IsZero() {
			stop = end
		}
		h := stop.Sub(s.created).Hours()
		f.nodeHours += h
		f.cost += h * s.price
		f.launched++
		if !s.initialized.IsZero() {
			launches = append(launches, s.initialized.Sub(s.created))
		}
	}
	sort.Slice(launches, func(i, j int) bool { return launches[i] < launches[j] })
	if len(launches) > 0 {
		var sum time.Duration
		for _, d := range launches {
			sum += d
		}
		f.launch = sum / time.Duration(len(launches))
	}
	if f.deleted > 0 {
		f.drain = drains / time.Duration(f.deleted)
	}
	var events corev1.EventList
	if err := framework.Kube.List(ctx, &events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == "Evicted" {
			f.evictions += int(max(e.Count, 1))
		}
	}
	return f
}
