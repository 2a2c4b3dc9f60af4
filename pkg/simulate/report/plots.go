// Package report writes a simulation's results: one PNG and one SVG per
// plot (gonum/plot), summary.json for scripts, and report.html, which holds
// the plots and the tables in one self-contained file.
package report

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"

	"github.com/joiner-autoscaler/joiner/pkg/simulate"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// palette tells configurations apart; the bound of each is drawn dashed in
// its configuration's colour.
var palette = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, {R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

func colour(i int) color.RGBA { return palette[i%len(palette)] }

// Plot is one picture of the report.
type Plot struct {
	// Name is the files' base name: Name.png and Name.svg.
	Name  string
	Title string
}

// plots draws every plot of results and saves each as PNG and SVG in dir.
func plots(dir string, results []*simulate.Result) ([]Plot, error) {
	var out []Plot
	save := func(name, title string, p *plot.Plot) error {
		p.Title.Text = title
		for _, ext := range []string{".png", ".svg"} {
			if err := p.Save(10*vg.Inch, 4*vg.Inch, filepath.Join(dir, name+ext)); err != nil {
				return fmt.Errorf("saving %s%s: %w", name, ext, err)
			}
		}
		out = append(out, Plot{Name: name, Title: title})
		return nil
	}
	series := []struct {
		name, title, y string
		value          func(simulate.Sample) float64
		bound          bool
	}{
		{"cost", "Cost over time, against the LP lower bound of the pods (dashed)", "$/hour", func(s simulate.Sample) float64 { return s.CostPerHour }, true},
		{"nodes", "Nodes", "nodes", func(s simulate.Sample) float64 { return float64(s.Nodes) }, false},
		{"pending", "Pending pods", "pods", func(s simulate.Sample) float64 { return float64(s.Pending) }, false},
	}
	for _, sr := range series {
		p := timePlot(sr.y)
		for i, r := range results {
			if err := addLine(p, r.Summary.Config, colour(i), false, r.Samples, sr.value); err != nil {
				return nil, err
			}
			if sr.bound {
				if err := addLine(p, r.Summary.Config+" (LP bound)", colour(i), true, r.Samples, func(s simulate.Sample) float64 { return s.BoundPerHour }); err != nil {
					return nil, err
				}
			}
		}
		if err := save(sr.name, sr.title, p); err != nil {
			return nil, err
		}
	}
	for i, r := range results {
		p := timePlot("nodes")
		for j, ct := range keysOf(r.Samples, func(s simulate.Sample) map[string]int { return s.ByCapacity }) {
			ct := ct
			if err := addLine(p, ct, colour(j), false, r.Samples, func(s simulate.Sample) float64 { return float64(s.ByCapacity[ct]) }); err != nil {
				return nil, err
			}
		}
		types := keysOf(r.Samples, func(s simulate.Sample) map[string]int { return s.ByType })
		if len(types) > 6 {
			types = types[:6]
		}
		for j, it := range types {
			it := it
			if err := addLine(p, it, colour(j+2), true, r.Samples, func(s simulate.Sample) float64 { return float64(s.ByType[it]) }); err != nil {
				return nil, err
			}
		}
		if err := save(fmt.Sprintf("nodes-by-type-%d", i+1), fmt.Sprintf("%s: nodes by capacity type, and by instance type (dashed, the six most used)", r.Summary.Config), p); err != nil {
			return nil, err
		}
	}
	bars, err := disruptionBars(results)
	if err != nil {
		return nil, err
	}
	if err := save("disruptions", "Nodes disrupted and pods evicted, by reason", bars); err != nil {
		return nil, err
	}
	return out, nil
}

func timePlot(y string) *plot.Plot {
	p := plot.New()
	p.X.Label.Text = "hours"
	p.Y.Label.Text = y
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, name string, c color.RGBA, dashed bool, samples []simulate.Sample, value func(simulate.Sample) float64) error {
	xys := make(plotter.XYs, len(samples))
	for i, s := range samples {
		xys[i] = plotter.XY{X: s.Minutes / 60, Y: value(s)}
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plotting %s: %w", name, err)
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// keysOf are the keys the samples' maps use, the most used first.
func keysOf(samples []simulate.Sample, m func(simulate.Sample) map[string]int) []string {
	total := map[string]int{}
	for _, s := range samples {
		for k, v := range m(s) {
			total[k] += v
		}
	}
	keys := make([]string, 0, len(total))
	for k := range total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if total[keys[i]] != total[keys[j]] {
			return total[keys[i]] > total[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// disruptionBars groups, per reason, each configuration's disrupted nodes
// and evicted pods.
func disruptionBars(results []*simulate.Result) (*plot.Plot, error) {
	reasons := map[string]bool{}
	for _, r := range results {
		for k := range r.Summary.Disruptions {
			reasons[k] = true
		}
		for k := range r.Summary.EvictionsByReason {
			reasons[k] = true
		}
	}
	var names []string
	for k := range reasons {
		names = append(names, k)
	}
	sort.Strings(names)
	p := plot.New()
	p.Y.Label.Text = "count"
	p.Legend.Top = true
	if len(names) == 0 {
		names = []string{"none"}
	}
	p.NominalX(names...)
	w := vg.Points(12)
	n := 2 * len(results)
	for i, r := range results {
		for j, kind := range []string{"nodes", "pods evicted"} {
			vals := make(plotter.Values, len(names))
			for k, name := range names {
				if j == 0 {
					vals[k] = float64(r.Summary.Disruptions[name])
				} else {
					vals[k] = float64(r.Summary.EvictionsByReason[name])
				}
			}
			b, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			b.Color = colour(i)
			if j == 1 {
				b.Color = color.RGBA{R: colour(i).R / 2, G: colour(i).G / 2, B: colour(i).B / 2, A: 0xff}
			}
			b.LineStyle.Width = 0
			b.Offset = w * vg.Length(2*i+j-n/2)
			p.Add(b)
			p.Legend.Add(r.Summary.Config+": "+kind, b)
		}
	}
	return p, nil
}
