package simulate

import (
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stretch is the part of the README's day (diurnal, peak 2,000 pods, seed
// 1) from from to from+span, started at the replicas the day has at from.
func stretch(tb testing.TB, from, span time.Duration) (*manifests.Objects, *Trace) {
	tb.Helper()
	objs, err := manifests.LoadFiles([]string{"testdata/nodepool.yaml"})
	if err != nil {
		tb.Fatal(err)
	}
	day, _, err := Generate("diurnal", objs, 2000, 24*time.Hour, 1)
	if err != nil {
		tb.Fatal(err)
	}
	tr := &Trace{Duration: metav1.Duration{Duration: span}}
	start := map[string]int{}
	for _, e := range day.Events {
		switch at := e.At.Duration; {
		case at <= from:
			start[e.Scale.Deployment] = e.Scale.Replicas
		case at < from+span:
			e.At.Duration -= from
			tr.Events = append(tr.Events, e)
		}
	}
	for _, d := range objs.Deployments {
		r := int32(start[d.Namespace+"/"+d.Name])
		d.Spec.Replicas = &r
	}
	return objs, tr
}

// BenchmarkDiurnalRise times the 20 minutes of the README's day from 8:00,
// where it rises fastest and consolidation has the most to weigh:
//
//	go test -run '^$' -bench DiurnalRise -benchtime 1x ./pkg/simulate
func BenchmarkDiurnalRise(b *testing.B) { benchStretch(b, "rise", 8*time.Hour, 20*time.Minute) }

// BenchmarkDiurnalNoon times the 30 minutes of the README's day from noon,
// its peak, where passes weigh the most candidates.
func BenchmarkDiurnalNoon(b *testing.B) { benchStretch(b, "noon", 12*time.Hour, 30*time.Minute) }

func benchStretch(b *testing.B, name string, from, span time.Duration) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var res *Result
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		objs, tr := stretch(b, from, span)
		b.StartTimer()
		if res, err = Run(Config{Name: name, Objects: objs, InstanceTypes: its, Timing: DefaultTiming()}, tr, nil); err != nil {
			b.Fatal(err)
		}
	}
	s := res.Summary
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/run")
	b.ReportMetric(float64(s.DisruptionPasses), "passes")
	b.ReportMetric(s.TotalCost, "$")
	b.ReportMetric(float64(s.Evictions), "evictions")
	b.ReportMetric(float64(s.NodesLaunched), "launched")
}
