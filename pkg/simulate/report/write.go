package report

import (
	"encoding/json"
	"fmt"
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
		page.Plots = append(page.Plots, plotData{Title: p.Title, Name: p.Name, SVG: string(svg)})
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
	if err := writePage(f, page); err != nil {
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
	// SVG is the plot's own SVG file, written by gonum/plot: trusted
	// markup, put in the page as it is.
	SVG string
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
