package viewer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// View is what the user toggled with keys.
type View struct {
	// ShowDisruption adds a line under each node with Joiner's disruption
	// status (key d).
	ShowDisruption bool
	// ShowPending lists the pending pods instead of the nodes (key p).
	ShowPending bool
	// Page of the node list; Height is the screen's, 0 for no paging.
	Page, Height int
}

// Bar widths: never narrower than minBar, never wider than maxBar.
const (
	minBar = 10
	maxBar = 40
)

// Help is the key line.
const Help = "←/→ page • d: disruption status • p: pending pods • q: quit"

// Render lays the snapshot out for a screen width columns wide. It is pure:
// the same snapshot, view, width and style always give the same text.
func Render(s Snapshot, v View, width int, st Style) string {
	if width <= 0 {
		width = 80
	}
	header := renderHeader(s, width, st)
	footer := renderFooter(s, st)
	var body []string
	if v.ShowPending {
		body = renderPending(s)
	} else {
		body = renderNodes(s, v, width, st, len(header)+len(footer)+2)
	}
	lines := append(append(append(header, ""), body...), "")
	lines = append(lines, footer...)
	for i, l := range lines {
		lines[i] = ansi.Truncate(strings.TrimRight(l, " "), width, "…")
	}
	return strings.Join(lines, "\n") + "\n"
}

func renderHeader(s Snapshot, width int, st Style) []string {
	nodes := plural(len(s.Nodes)-s.Launching, "node")
	if s.Launching > 0 {
		nodes += fmt.Sprintf(" (+%d launching)", s.Launching)
	}
	parts := []string{nodes}
	if !s.Options.DisablePricing {
		cost := fmt.Sprintf("%s/hour | %s/month", dollars(s.PricePerHour, 4), dollars(s.PricePerHour*HoursPerMonth, 2))
		if s.Committed {
			cost = fmt.Sprintf("%s/hour list · %s/hour effective | %s/month effective", dollars(s.PricePerHour, 4), dollars(s.EffectivePerHour, 4), dollars(s.EffectivePerHour*HoursPerMonth, 2))
		}
		if s.Unpriced > 0 {
			cost += fmt.Sprintf(" (%d unpriced)", s.Unpriced)
		}
		parts = append(parts, cost)
	}
	pending := fmt.Sprintf("%d pending pods", len(s.Pending))
	if len(s.Pending) > 0 {
		pending = st.OK(pending)
	}
	parts = append(parts, pending)
	out := []string{strings.Join(parts, " · ")}

	rows := make([][]string, 0, len(s.Totals))
	for _, t := range s.Totals {
		frac := fraction(t.Requests, t.Allocatable)
		rows = append(rows, []string{string(t.Resource), formatQuantity(t.Resource, t.Requests) + "/" + formatQuantity(t.Resource, t.Allocatable), st.Percent(100 * frac), ""})
	}
	bar := barWidth(width - tableWidth(rows) - 2)
	for i, t := range s.Totals {
		rows[i][3] = st.Bar(fraction(t.Requests, t.Allocatable), bar)
	}
	return append(out, table(rows)...)
}

func renderFooter(s Snapshot, st Style) []string {
	var out []string
	if s.Options.DisablePricing {
		out = append(out, st.Faint("prices: disabled (--disable-pricing)"))
	} else {
		if len(s.PriceNotes) > 0 {
			out = append(out, st.Faint("prices: "+strings.Join(s.PriceNotes, "; ")))
		}
		if len(s.CommitmentNotes) > 0 {
			out = append(out, "commitments: "+strings.Join(s.CommitmentNotes, "; "))
		}
		switch {
		case s.BoundErr != "":
			out = append(out, "LP lower bound: "+s.BoundErr)
		case s.BoundPods > 0:
			var nodeCost float64
			for _, n := range s.Nodes {
				if n.Managed() && n.Priced {
					nodeCost += n.Price
				}
			}
			save := nodeCost - s.Bound
			line := fmt.Sprintf("Joiner's nodes %s/h · LP lower bound of their %d pods %s/h", dollars(nodeCost, 4), s.BoundPods, dollars(s.Bound, 4))
			if save > 0.00005 && nodeCost > 0 {
				line += " · " + st.OK(fmt.Sprintf("at most %s/h (%.0f%%) left to save", dollars(save, 4), 100*save/nodeCost))
			} else {
				line += " · " + st.Good("at the bound")
			}
			out = append(out, line)
		}
	}
	return append(out, st.Faint(Help))
}

// renderNodes is the node table, one line per resource per node, paged to
// fit the height left by reserved lines.
func renderNodes(s Snapshot, v View, width int, st Style, reserved int) []string {
	if len(s.Nodes) == 0 {
		return []string{"no nodes yet"}
	}
	head := []string{"NODE", "", "", "PODS", "TYPE", "CAPACITY", "ZONE", "NODEPOOL"}
	if !s.Options.DisablePricing {
		head = append(head, "$/HOUR")
	}
	head = append(head, "STATE")
	for _, k := range s.Options.ExtraLabels {
		head = append(head, strings.ToUpper(k))
	}
	type block struct{ rows [][]string }
	blocks := make([]block, len(s.Nodes))
	all := [][]string{head}
	for i, n := range s.Nodes {
		for j, r := range s.Options.Resources {
			row := make([]string, len(head))
			row[1] = string(r)
			row[2] = st.Percent(100 * fraction(n.Requests[r], n.Allocatable[r]))
			if j == 0 {
				row[0] = n.Name
				row[3] = plural(n.Pods, "pod")
				row[4], row[5], row[6], row[7] = dash(n.InstanceType), dash(n.CapacityType), dash(n.Zone), dash(n.NodePool)
				c := 8
				if !s.Options.DisablePricing {
					row[c] = "-"
					if n.Priced {
						row[c] = dollars(n.Price, 4)
					}
					c++
				}
				row[c] = stateText(n, st)
				for k, e := range n.Extra {
					row[c+1+k] = dash(e)
				}
			}
			blocks[i].rows = append(blocks[i].rows, row)
			all = append(all, row)
		}
	}
	// The bar goes between the name and the percentage, as wide as the
	// screen leaves room for.
	bar := barWidth(width - tableWidth(all) - 1)
	for i, n := range s.Nodes {
		for j, r := range s.Options.Resources {
			row := blocks[i].rows[j]
			row[2] = st.Bar(fraction(n.Requests[r], n.Allocatable[r]), bar) + " " + row[2]
		}
	}
	lines := table(all)
	out := []string{lines[0]}
	per, pages := pageSize(s, v, reserved)
	v.Page = min(max(v.Page, 0), pages-1)
	first, last := v.Page*per, min((v.Page+1)*per, len(s.Nodes))
	row := 1
	for i := 0; i < len(s.Nodes); i++ {
		show := i >= first && i < last
		for range s.Options.Resources {
			if show {
				out = append(out, lines[row])
			}
			row++
		}
		if show && v.ShowDisruption {
			status := "no disruption status"
			if len(s.Nodes[i].Disruption) > 0 {
				status = strings.Join(s.Nodes[i].Disruption, " · ")
			}
			out = append(out, "  └ "+status)
		}
	}
	if pages > 1 {
		out = append(out, fmt.Sprintf("page %d/%d", v.Page+1, pages))
	}
	return out
}

// pageSize is how many nodes fit a page and how many pages there are:
// the screen's height less the reserved lines, the table's head and the
// page line.
func pageSize(s Snapshot, v View, reserved int) (per, pages int) {
	if v.Height <= 0 || len(s.Nodes) == 0 {
		return max(len(s.Nodes), 1), 1
	}
	perNode := len(s.Options.Resources)
	if v.ShowDisruption {
		perNode++
	}
	per = max((v.Height-reserved-2)/perNode, 1)
	return per, (len(s.Nodes) + per - 1) / per
}

// Pages is how many pages of nodes Render shows for the view.
func Pages(s Snapshot, v View, width int) int {
	reserved := len(renderHeader(s, width, PlainStyle())) + len(renderFooter(s, PlainStyle())) + 2
	_, pages := pageSize(s, v, reserved)
	return pages
}

func renderPending(s Snapshot) []string {
	if len(s.Pending) == 0 {
		return []string{"no pending pods"}
	}
	rows := [][]string{{"PENDING POD", "AGE", "JOINER SAYS"}}
	for _, p := range s.Pending {
		reason := p.Reason
		if reason == "" {
			reason = "(no event from Joiner yet)"
		}
		rows = append(rows, []string{p.Name, p.Age, reason})
	}
	return table(rows)
}

func stateText(n Node, st Style) string {
	if len(n.States) == 0 {
		return st.Good(StateReady)
	}
	var parts []string
	for _, s := range n.States {
		switch s {
		case StateNotReady, StateDeleting:
			parts = append(parts, st.Bad(s))
		default:
			parts = append(parts, st.OK(s))
		}
	}
	// How long a node has been launching or not ready is what tells a slow
	// boot from a stuck one, as eks-node-viewer shows it.
	text := strings.Join(parts, ",")
	if n.Age != "" && !slices.Contains(n.States, StateDeleting) && !slices.Contains(n.States, StateCordoned) {
		text += " " + n.Age
	}
	return text
}

// table pads cells to their column's widest, two spaces apart; cells may
// hold colour codes.
func table(rows [][]string) []string {
	widths := columnWidths(rows)
	out := make([]string, len(rows))
	for i, r := range rows {
		var b strings.Builder
		for j, c := range r {
			if widths[j] == 0 {
				continue
			}
			b.WriteString(c)
			if j < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[j]-lipgloss.Width(c)+2))
			}
		}
		out[i] = b.String()
	}
	return out
}

func columnWidths(rows [][]string) []int {
	var widths []int
	for _, r := range rows {
		for j, c := range r {
			if j >= len(widths) {
				widths = append(widths, 0)
			}
			widths[j] = max(widths[j], lipgloss.Width(c))
		}
	}
	return widths
}

func tableWidth(rows [][]string) int {
	w := 0
	for _, c := range columnWidths(rows) {
		if c > 0 {
			w += c + 2
		}
	}
	return w
}

func barWidth(room int) int { return min(max(room, minBar), maxBar) }

func fraction(used, total resource.Quantity) float64 {
	t := total.AsApproximateFloat64()
	if t <= 0 {
		return 0
	}
	return used.AsApproximateFloat64() / t
}

// formatQuantity prints cpu in cores and memory in GiB, short enough for a
// column; other resources as Kubernetes writes them.
func formatQuantity(r corev1.ResourceName, q resource.Quantity) string {
	switch r {
	case corev1.ResourceCPU:
		return strconv.FormatFloat(float64(q.MilliValue())/1000, 'f', -1, 64)
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return strconv.FormatFloat(q.AsApproximateFloat64()/(1<<30), 'f', 1, 64) + "Gi"
	}
	return q.String()
}

func dollars(f float64, decimals int) string { return "$" + strconv.FormatFloat(f, 'f', decimals, 64) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plural counts things in English: "1 node", "2 nodes".
func plural(n int, thing string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", thing)
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
