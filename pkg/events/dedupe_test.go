package events

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestDeduped: an event repeated about the same object within the window
// is recorded once; a new message, another object, or the window's end
// records it again.
func TestDeduped(t *testing.T) {
	pod := func(name string, uid types.UID) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid}}
	}
	a, b := pod("a", "uid-a"), pod("b", "uid-b")
	noUID := pod("c", "")
	type emit struct {
		after time.Duration
		obj   *corev1.Pod
		msg   string
	}
	cases := []struct {
		name  string
		emits []emit // each after the one before
		want  int
	}{
		{"repeated within the window", []emit{{0, a, "no room"}, {10 * time.Second, a, "no room"}, {Window - 20*time.Second, a, "no room"}}, 1},
		{"after the window", []emit{{0, a, "no room"}, {Window + time.Second, a, "no room"}}, 2},
		{"a new message", []emit{{0, a, "no room"}, {0, a, "no NodePool"}}, 2},
		{"another object", []emit{{0, a, "no room"}, {0, b, "no room"}}, 2},
		{"an object without a UID, by name", []emit{{0, noUID, "no room"}, {0, noUID, "no room"}, {0, pod("d", ""), "no room"}}, 2},
		{"within the window across a generation's end", []emit{{0, a, "no room"}, {Window - 10*time.Second, b, "no room"}, {20 * time.Second, b, "no room"}}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
			fake := record.NewFakeRecorder(100)
			rec := Deduped(fake, clk)
			for _, e := range c.emits {
				clk.Step(e.after)
				rec.Eventf(e.obj, corev1.EventTypeWarning, "FailedScheduling", "Failed to schedule pod, %s", e.msg)
			}
			if got := len(fake.Events); got != c.want {
				t.Errorf("%d events recorded, want %d", got, c.want)
			}
		})
	}
}

// TestDedupedForgets: what is remembered is the events of the last two
// windows at most; older ones are dropped whole, not kept until pushed out.
func TestDedupedForgets(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	rec := Deduped(record.NewFakeRecorder(2000), clk)
	for i := range 1000 {
		rec.Event(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint(i))}}, corev1.EventTypeNormal, "Nominated", "here")
	}
	clk.Step(Window + time.Second)
	rec.Event(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late", UID: "late"}}, corev1.EventTypeNormal, "Nominated", "here")
	clk.Step(Window + time.Second)
	rec.Event(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "later", UID: "later"}}, corev1.EventTypeNormal, "Nominated", "here")
	d := rec.(*deduped)
	if n := len(d.current) + len(d.previous); n != 2 {
		t.Fatalf("%d events remembered two windows on, want the last two", n)
	}
}
