package report

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
)

// writePage writes report.html. It is written out by hand, not with
// html/template: a template calls methods by name through reflection,
// which makes the linker keep every exported method of every type in the
// binary, and joiner's grew from 68 to 154 MB with it.
func writePage(w io.Writer, page pageData) error {
	b := bufio.NewWriter(w)
	e := html.EscapeString
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>joiner simulate</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}
figure{margin:1.5em 0}
figure svg{width:100%;max-width:1000px;height:auto}
</style></head><body>
<h1>joiner simulate</h1>
`)
	fmt.Fprintf(b, "<p>Trace: %s</p>\n", e(page.Trace))
	// Under commitments the costs are the bill's, and the list is shown
	// beside them.
	onBill := false
	for _, c := range page.Configs {
		onBill = onBill || c.ListCost != c.TotalCost
	}
	if onBill {
		b.WriteString(`<p id="onBill">Costs are on the bill under the account's Reserved Instances and Savings Plans (--commitments): each node at its effective price as the commitments cover it from moment to moment, without the RIs' fees, which are paid whatever runs. The LP bound is the bound at list prices less the most the commitments could save.</p>` + "\n")
	}
	b.WriteString("<h2>Summary</h2>\n<table id=\"summary\">\n<tr><th>configuration</th><th>total cost</th>")
	if onBill {
		b.WriteString("<th>at list prices</th>")
	}
	b.WriteString("<th>LP bound</th><th>above bound</th><th>node-hours</th><th>peak nodes</th><th>evictions</th><th>pending p50 (s)</th><th>pending p99 (s)</th><th>disruptions</th></tr>\n")
	for _, c := range page.Configs {
		fmt.Fprintf(b, `<tr><td>%s</td><td class="totalCost">$%.2f</td>`, e(c.Config), c.TotalCost)
		if onBill {
			fmt.Fprintf(b, `<td class="listCost">$%.2f</td>`, c.ListCost)
		}
		fmt.Fprintf(b, `<td class="lpBoundCost">$%.2f</td><td>$%.2f</td><td class="nodeHours">%.2f</td><td class="peakNodes">%d</td><td class="evictions">%d</td><td>%g</td><td>%g</td><td>%s</td></tr>`+"\n",
			c.LPBoundCost, c.CostAboveBound, c.NodeHours, c.PeakNodes, c.Evictions, c.PendingSecondsP50, c.PendingSecondsP99, e(reasons(c.Disruptions)))
	}
	b.WriteString("</table>\n")
	for _, c := range page.Configs {
		if c.LostPods > 0 {
			fmt.Fprintf(b, `<p class="lostPods">%s: <span class="count">%d</span> bare Pods were evicted, and no controller makes them again.</p>`+"\n", e(c.Config), c.LostPods)
		}
	}
	for _, p := range page.Plots {
		fmt.Fprintf(b, "<figure id=\"%s\">%s</figure>\n", e(p.Name), p.SVG)
	}
	for _, d := range page.Details {
		fmt.Fprintf(b, "<h2>%s: disruption commands</h2>\n<table><tr><th>at</th><th>reason</th><th>nodes</th><th>replacements</th><th>saving</th></tr>\n", e(d.Name))
		for _, c := range d.Decisions {
			fmt.Fprintf(b, "<tr><td>%02d:%02d</td><td>%s</td><td>%s</td><td>%s</td><td>$%.4f/h</td></tr>\n",
				int(c.Minutes)/60, int(c.Minutes)%60, e(c.Reason), e(strings.Join(c.Nodes, " ")), e(strings.Join(c.Replacements, " ")), c.Savings)
		}
		b.WriteString("</table>\n")
		if d.More > 0 {
			fmt.Fprintf(b, "<p>and %d more (results.json has them all).</p>\n", d.More)
		}
		b.WriteString("<h3>Why nodes were left alone (nodes × passes)</h3>\n<table><tr><th>reason</th><th>nodes × passes</th></tr>")
		for _, x := range d.Blocked {
			fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td></tr>", e(x.Why), x.Passes)
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</body></html>\n")
	return b.Flush()
}

// reasons is a count by reason as "reason n, ...", sorted; "none" when empty.
func reasons(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
