package report

import (
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/simulate"
)

// TestReportRendersAndAgrees writes the report of two configurations and
// checks that its totals are summary.json's, its PNGs decode, and headless
// Chromium draws its plots: the screenshot holds the configurations'
// colours, which only the inline SVGs paint.
func TestReportRendersAndAgrees(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found: make setup installs it (Debian's chromium)")
	}
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var results []*simulate.Result
	for _, f := range []string{"nodepool.yaml", "whenempty.yaml"} {
		base, err := manifests.LoadFiles([]string{"../testdata/nodepool.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		trace, _, err := simulate.Generate("diurnal", base, 60, 6*time.Hour, 1)
		if err != nil {
			t.Fatal(err)
		}
		objs := base
		if f != "nodepool.yaml" {
			over, err := manifests.LoadFiles([]string{"../testdata/" + f})
			if err != nil {
				t.Fatal(err)
			}
			objs = simulate.Override(base, over)
		}
		res, err := simulate.Run(simulate.Config{Name: f, Objects: objs, InstanceTypes: its, Timing: simulate.DefaultTiming()}, trace, nil)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	// The day has no bare Pods: say one configuration lost three, which
	// the page must show.
	results[1].Summary.LostPods = 3
	dir := t.TempDir()
	if err := Write(dir, "test", results); err != nil {
		t.Fatal(err)
	}
	var doc Document
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Configurations) != 2 || doc.TotalCost != doc.Configurations[0].TotalCost {
		t.Fatalf("summary.json: %+v", doc)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]func(simulate.Summary) string{
		"totalCost":   func(s simulate.Summary) string { return fmt.Sprintf("$%.2f", s.TotalCost) },
		"lpBoundCost": func(s simulate.Summary) string { return fmt.Sprintf("$%.2f", s.LPBoundCost) },
		"nodeHours":   func(s simulate.Summary) string { return fmt.Sprintf("%.2f", s.NodeHours) },
		"peakNodes":   func(s simulate.Summary) string { return fmt.Sprint(s.PeakNodes) },
		"evictions":   func(s simulate.Summary) string { return fmt.Sprint(s.Evictions) },
	} {
		cells := regexp.MustCompile(`<td class="`+field+`">([^<]*)</td>`).FindAllStringSubmatch(string(page), -1)
		if len(cells) != 2 {
			t.Fatalf("report.html has %d %s cells, want 2", len(cells), field)
		}
		for i, c := range cells {
			if w := want(doc.Configurations[i]); c[1] != w {
				t.Errorf("report.html %s of %s is %s, summary.json's %s", field, doc.Configurations[i].Config, c[1], w)
			}
		}
	}
	if !strings.Contains(string(page), `whenempty.yaml: <span class="count">3</span> bare Pods were evicted`) || strings.Contains(string(page), `nodepool.yaml: <span class="count">`) {
		t.Errorf("report.html should say that whenempty.yaml lost 3 bare Pods, and nothing of nodepool.yaml, which lost none")
	}
	for _, name := range []string{"cost", "nodes", "pending", "disruptions", "nodes-by-type-1"} {
		f, err := os.Open(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s.png: %v", name, err)
		}
		f.Close()
	}
	shot := filepath.Join(dir, "screenshot.png")
	out, err := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,2400",
		"--screenshot="+shot, "file://"+filepath.Join(dir, "report.html")).CombinedOutput()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, out)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	for i := range results {
		if n := pixelsOf(img, colour(i).R, colour(i).G, colour(i).B); n < 200 {
			t.Errorf("the screenshot has %d pixels of %s's colour: its plot lines did not render", n, results[i].Summary.Config)
		}
	}
	if !strings.Contains(string(page), "<svg") {
		t.Error("report.html holds no inline SVG")
	}
}

// pixelsOf counts img's pixels within a little of the colour.
func pixelsOf(img image.Image, r, g, b uint8) int {
	n := 0
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -24 && d < 24 }
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if near(cr, r) && near(cg, g) && near(cb, b) {
				n++
			}
		}
	}
	return n
}
