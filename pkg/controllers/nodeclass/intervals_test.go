package nodeclass_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclass"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestResyncInterval: a Ready class is resolved again after Resync
// (SUBNET_REFRESH_INTERVAL), ResyncPeriod when it is zero.
func TestResyncInterval(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resync time.Duration
		want   time.Duration
	}{
		{name: "unset", want: nodeclass.ResyncPeriod},
		{name: "5s", resync: 5 * time.Second, want: 5 * time.Second},
		{name: "2m", resync: 2 * time.Minute, want: 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, guideClass())
			e.ctrl.Resync = tc.resync
			res, err := e.reconcile()
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != tc.want {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, tc.want)
			}
		})
	}
}

// TestAMIWatchPeriod: the watch reads the alias parameters every Period
// (AMI_REFRESH_INTERVAL), AMICheckPeriod when it is zero, and not sooner.
func TestAMIWatchPeriod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		period time.Duration
		// early is a step after which no read is due; due, one after which
		// the first read is.
		early, due time.Duration
	}{
		{name: "unset", early: nodeclass.AMICheckPeriod - time.Second, due: time.Second},
		{name: "10m", period: 10 * time.Minute, early: nodeclass.AMICheckPeriod, due: 10*time.Minute - nodeclass.AMICheckPeriod},
		{name: "10s", period: 10 * time.Second, early: 9 * time.Second, due: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The status lists the parameters' images: nothing to
			// re-resolve, so the watch sends nothing and keeps ticking.
			params := &fakeParameters{values: map[string]string{al2023x86: "ami-x1", al2023arm: "ami-a1"}}
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			w := &nodeclass.AMIWatch{Client: watchKube(t, watchedClass("current", "al2023@latest", "ami-x1", "ami-a1")), SSM: params,
				KubernetesVersion: func(context.Context) (string, error) { return "1.33", nil }, Clock: clk, Period: tc.period}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = w.Start(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			reads := func() int {
				params.mu.Lock()
				defer params.mu.Unlock()
				return len(params.calls)
			}
			for !clk.HasWaiters() {
				time.Sleep(time.Millisecond)
			}
			clk.Step(tc.early)
			time.Sleep(200 * time.Millisecond)
			if n := reads(); n != 0 {
				t.Fatalf("%d parameter reads %v after the start, before the period %v", n, tc.early, tc.period)
			}
			clk.Step(tc.due)
			for deadline := time.Now().Add(5 * time.Second); reads() == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no parameter read %v after the start", tc.early+tc.due)
				}
			}
		})
	}
}

// countingCollector counts the collections.
type countingCollector struct{ n atomic.Int32 }

func (c *countingCollector) GarbageCollect(context.Context, map[string]bool) ([]string, error) {
	c.n.Add(1)
	return nil, nil
}

// TestProfileGCPeriod: unused profiles are collected at the start, then
// every Period (INSTANCE_PROFILE_GC_INTERVAL), ProfileGCPeriod when it is
// zero, and not sooner.
func TestProfileGCPeriod(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	_ = awsv1.AddToScheme(scheme)
	for _, tc := range []struct {
		name        string
		period      time.Duration
		early, next time.Duration // steps after which the second collection is not due, then is
	}{
		{name: "unset", early: nodeclass.ProfileGCPeriod - time.Second, next: time.Second},
		{name: "2s", period: 2 * time.Second, early: time.Second, next: time.Second},
		{name: "1h", period: time.Hour, early: nodeclass.ProfileGCPeriod, next: time.Hour - nodeclass.ProfileGCPeriod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			c := &countingCollector{}
			g := &nodeclass.ProfileGC{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), Profiles: c, Clock: clk, Period: tc.period}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = g.Start(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			for !clk.HasWaiters() {
				time.Sleep(time.Millisecond)
			}
			if n := c.n.Load(); n != 1 {
				t.Fatalf("%d collections at the start, want 1", n)
			}
			clk.Step(tc.early)
			time.Sleep(200 * time.Millisecond)
			if n := c.n.Load(); n != 1 {
				t.Fatalf("%d collections %v after the start, before the period %v", n, tc.early, tc.period)
			}
			clk.Step(tc.next)
			for deadline := time.Now().Add(5 * time.Second); c.n.Load() < 2; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no second collection %v after the start", tc.early+tc.next)
				}
			}
		})
	}
}
