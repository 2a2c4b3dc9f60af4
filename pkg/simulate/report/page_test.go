package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/simulate"
)

// TestPageOnTheBill: a run priced under commitments shows its list cost
// beside the bill's, and says what the bill counts; a run at list prices
// shows one cost.
func TestPageOnTheBill(t *testing.T) {
	cases := []struct {
		name   string
		sum    simulate.Summary
		onBill bool
	}{
		{"at list prices", simulate.Summary{Config: "a", TotalCost: 10, ListCost: 10}, false},
		{"under commitments", simulate.Summary{Config: "a", TotalCost: 7.5, ListCost: 10}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writePage(&b, pageData{Trace: "t", Configs: []simulate.Summary{c.sum}}); err != nil {
				t.Fatal(err)
			}
			page := b.String()
			if got := strings.Contains(page, `<td class="listCost">$10.00</td>`); got != c.onBill {
				t.Errorf("list cost cell shown: %v, want %v", got, c.onBill)
			}
			if got := strings.Contains(page, `id="onBill"`); got != c.onBill {
				t.Errorf("note on the bill shown: %v, want %v", got, c.onBill)
			}
			if !strings.Contains(page, fmt.Sprintf(`<td class="totalCost">$%.2f</td>`, c.sum.TotalCost)) {
				t.Errorf("no total cost cell: %s", page)
			}
		})
	}
}
