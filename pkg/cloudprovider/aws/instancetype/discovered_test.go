package instancetype

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

// TestDiscovered: the smallest memory a node of the type reported under
// the class's images wins, for 60 days; other images learn nothing from it.
func TestDiscovered(t *testing.T) {
	amis := []awsv1.AMI{{ID: "ami-b"}, {ID: "ami-a"}}
	for _, tt := range []struct {
		name    string
		observe []string
		after   time.Duration
		ask     []awsv1.AMI
		want    string // "" for none
	}{
		{name: "nothing observed", ask: amis},
		{name: "one node", observe: []string{"7901Mi"}, ask: amis, want: "7901Mi"},
		{name: "the smaller of two", observe: []string{"7901Mi", "7890Mi"}, ask: amis, want: "7890Mi"},
		{name: "a larger one later does not raise it", observe: []string{"7890Mi", "7901Mi"}, ask: amis, want: "7890Mi"},
		{name: "the same images in another order", observe: []string{"7901Mi"}, ask: []awsv1.AMI{{ID: "ami-a"}, {ID: "ami-b"}}, want: "7901Mi"},
		{name: "another image", observe: []string{"7901Mi"}, ask: []awsv1.AMI{{ID: "ami-c"}}},
		{name: "forgotten after 60 days", observe: []string{"7901Mi"}, after: DiscoveredTTL, ask: amis},
		{name: "kept for 59", observe: []string{"7901Mi"}, after: 59 * 24 * time.Hour, ask: amis, want: "7901Mi"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			d := NewDiscovered(clk)
			for _, m := range tt.observe {
				d.Observe("m5.large", amis, resource.MustParse(m))
			}
			clk.Step(tt.after)
			got, ok := d.Memory("m5.large", tt.ask)
			if tt.want == "" {
				if ok {
					t.Fatalf("memory %s, want none", got.String())
				}
				return
			}
			if want := resource.MustParse(tt.want); !ok || got.Cmp(want) != 0 {
				t.Fatalf("memory %s (found %v), want %s", got.String(), ok, tt.want)
			}
		})
	}
}

// TestListUsesDiscoveredMemory: once a node reported its memory, List gives
// the type that capacity, and allocatable moves with it, under the class's
// images only.
func TestListUsesDiscoveredMemory(t *testing.T) {
	f := newFakeEC2(t, "m5.large")
	p := New(Options{EC2: f, Region: "us-east-1", VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, Clock: clocktesting.NewFakeClock(time.Now())})
	nc := nodeClass("us-east-1a")
	nc.Status.AMIs = []awsv1.AMI{{ID: "ami-1"}}
	memOf := func(nc *awsv1.EC2NodeClass) (capacity, allocatable resource.Quantity) {
		its, err := p.List(context.Background(), nc)
		if err != nil || len(its) != 1 {
			t.Fatalf("listed %d types: %v", len(its), err)
		}
		return its[0].Capacity[corev1.ResourceMemory], its[0].Allocatable[corev1.ResourceMemory]
	}
	estCap, estAlloc := memOf(nc)
	real := resource.MustParse("7800Mi")
	if !p.ObserveMemory("m5.large", nc, real) {
		t.Fatal("the first observation changed nothing")
	}
	gotCap, gotAlloc := memOf(nc)
	if gotCap.Cmp(real) != 0 {
		t.Errorf("capacity %s after a node reported %s (estimate %s)", gotCap.String(), real.String(), estCap.String())
	}
	wantAlloc := estAlloc.DeepCopy()
	wantAlloc.Add(real)
	wantAlloc.Sub(estCap)
	if gotAlloc.Cmp(wantAlloc) != 0 {
		t.Errorf("allocatable %s, want %s (the estimate's %s moved by the difference)", gotAlloc.String(), wantAlloc.String(), estAlloc.String())
	}
	other := nc.DeepCopy()
	other.Status.AMIs = []awsv1.AMI{{ID: "ami-2"}}
	if c, _ := memOf(other); c.Cmp(estCap) != 0 {
		t.Errorf("under another image, capacity %s, want the estimate %s", c.String(), estCap.String())
	}
}
