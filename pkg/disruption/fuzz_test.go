package disruption

import (
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzBudgetNodes: a budget's nodes field ("10%", "5") of any text, for
// any pool size, is refused or yields a count from 0 to the pool's size
// (a count) or its rounded-up share (a percentage), never a panic.
func FuzzBudgetNodes(f *testing.F) {
	for _, s := range []string{"10%", "0", "100%", "0%", "5", "-1", "101%", "%", "1e3", "99999999999999999999", " 5", "5 %", "10.5%"} {
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, value string, total int) {
		if total < 0 {
			total = -total
		}
		total %= 100000
		n, err := budgetNodes(value, total)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("budget %q of %d nodes allows %d", value, total, n)
		}
		if value[len(value)-1] == '%' && n > total {
			t.Fatalf("percentage budget %q of %d nodes allows %d", value, total, n)
		}
	})
}

// FuzzBudgetSchedule: a budget's schedule and duration of any text are
// refused with a message or answered, never a panic.
func FuzzBudgetSchedule(f *testing.F) {
	f.Add("0 9 * * mon-fri", "8h")
	f.Add("@daily", "10m")
	f.Add("*/5 * * * *", "1m")
	f.Add("61 * * * *", "1h")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, schedule, duration string) {
		d, err := v1.ParseNillableDuration(duration)
		if err != nil || d.IsNever() {
			return
		}
		b := v1.Budget{Nodes: "1", Schedule: &schedule, Duration: &metav1.Duration{Duration: *d.Duration}}
		_, _ = Active(b, time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	})
}
