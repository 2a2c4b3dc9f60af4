package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/simulate"
)

// Document is summary.json: the first configuration's summary at the top
// (what a script of one run reads), and every configuration's in order.
type Document struct {
	simulate.Summary
	Configurations []simulate.Summary `json:"configurations"`
	// Trace says what was replayed: a file, or a generator and its knobs.
	Trace string `json:"trace"`
}

// Write writes the report of results into dir (made if missing): one PNG
// and SVG per plot, summary.json, results.json and report.html. The HTML's totals are
// the same Summary values as the JSON's.
func Write(dir, trace string, results []*simulate.Result) error {
	if len(results) == 0 {
		return fmt.Errorf("no results to report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	doc := Document{Summary: results[0].Summary, Trace: trace}
	for _, r := range results {
		doc.Configurations = append(doc.Configurations, r.Summary)
	}
	raw, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	// results.json is every configuration's whole run: the time series
	// and each disruption command.
	if raw, err = json.Marshal(results); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), raw, 0o644); err != nil {
		return err
	}
	ps, err := plots(dir, results)
	if err != nil {
		return err
	}
	page := pageData{Trace: trace, Configs: doc.Configurations}
	for _, p := range ps {
		svg, err := os.ReadFile(filepath.Join(dir, p.Name+".svg"))
		if err != nil {
			return err
		}
		page.Plots = append(page.Plots, plotData{Title: p.Title, Name: p.Name, SVG: template.HTML(svg)})
	}
	for _, r := range results {
		c := configData{Name: r.Summary.Config, Decisions: r.Decisions}
		if len(c.Decisions) > maxDecisions {
			c.More = len(c.Decisions) - maxDecisions
			c.Decisions = c.Decisions[:maxDecisions]
		}
		for why, n := range r.Blocked {
			c.Blocked = append(c.Blocked, blockedData{Why: why, Passes: n})
		}
		sort.Slice(c.Blocked, func(i, j int) bool {
			if c.Blocked[i].Passes != c.Blocked[j].Passes {
				return c.Blocked[i].Passes > c.Blocked[j].Passes
			}
			return c.Blocked[i].Why < c.Blocked[j].Why
		})
		page.Details = append(page.Details, c)
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pageTemplate.Execute(f, page); err != nil {
		return fmt.Errorf("writing report.html: %w", err)
	}
	return f.Close()
}

// maxDecisions bounds each configuration's list of commands in the page.
const maxDecisions = 200

type pageData struct {
	Trace   string
	Configs []simulate.Summary
	Plots   []plotData
	Details []configData
}

type plotData struct {
	Title, Name string
	SVG         template.HTML
}

type configData struct {
	Name      string
	Decisions []simulate.Decision
	More      int
	Blocked   []blockedData
}

type blockedData struct {
	Why    string
	Passes int
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"money": func(v float64) string { return fmt.Sprintf("$%.2f", v) },
	"hours": func(m float64) string { return fmt.Sprintf("%02d:%02d", int(m)/60, int(m)%60) },
	"price": func(v float64) string { return fmt.Sprintf("$%.4f/h", v) },
	"reasons": func(m map[string]int) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := ""
		for i, k := range keys {
			if i > 0 {
				out += ", "
			}
			out += fmt.Sprintf("%s %d", k, m[k])
		}
		if out == "" {
			return "none"
		}
		return out
	},
}).Parse(`<!DOCTYPE html>
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
<p>Trace: {{.Trace}}</p>
<h2>Summary</h2>
<table id="summary">
<tr><th>configuration</th><th>total cost</th><th>LP bound</th><th>above bound</th><th>node-hours</th><th>peak nodes</th><th>evictions</th><th>pending p50 (s)</th><th>pending p99 (s)</th><th>disruptions</th></tr>
{{range .Configs}}<tr><td>{{.Config}}</td><td class="totalCost">{{money .TotalCost}}</td><td class="lpBoundCost">{{money .LPBoundCost}}</td><td>{{money .CostAboveBound}}</td><td class="nodeHours">{{printf "%.2f" .NodeHours}}</td><td class="peakNodes">{{.PeakNodes}}</td><td class="evictions">{{.Evictions}}</td><td>{{.PendingSecondsP50}}</td><td>{{.PendingSecondsP99}}</td><td>{{reasons .Disruptions}}</td></tr>
{{end}}</table>
{{range .Plots}}<figure id="{{.Name}}">{{.SVG}}</figure>
{{end}}
{{range .Details}}<h2>{{.Name}}: disruption commands</h2>
<table><tr><th>at</th><th>reason</th><th>nodes</th><th>replacements</th><th>saving</th></tr>
{{range .Decisions}}<tr><td>{{hours .Minutes}}</td><td>{{.Reason}}</td><td>{{range .Nodes}}{{.}} {{end}}</td><td>{{range .Replacements}}{{.}} {{end}}</td><td>{{price .Savings}}</td></tr>
{{end}}</table>{{if .More}}<p>and {{.More}} more (results.json has them all).</p>{{end}}
<h3>Why nodes were left alone (passes)</h3>
<table><tr><th>reason</th><th>passes</th></tr>{{range .Blocked}}<tr><td>{{.Why}}</td><td>{{.Passes}}</td></tr>{{end}}</table>
{{end}}
</body></html>
`))
