package viewer

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/colorprofile"
	corev1 "k8s.io/api/core/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func mustOptions(t *testing.T, resources, selector, extra, sortBy string, disablePricing bool) Options {
	t.Helper()
	res, err := ParseResources(resources)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := ParseSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := ParseExtraLabels(extra)
	if err != nil {
		t.Fatal(err)
	}
	so, err := ParseSort(sortBy)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Resources: res, Selector: sel, ExtraLabels: ex, Sort: so, DisablePricing: disablePricing}
}

// TestRenderGolden renders models built from fixed cluster objects, with
// the real catalog prices and LP bound, and compares the text with
// testdata/<name>.golden (go test -update rewrites them).
func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		in                                 Input
		resources, selector, extra, sortBy string
		disablePricing                     bool
		view                               View
		width                              int
	}{
		{name: "empty", in: Input{Now: now}, width: 100},
		{name: "mixed", in: mixedCluster(), width: 160},
		{name: "mixed-cpu-memory-sorted", in: mixedCluster(), resources: "cpu,memory", sortBy: "karpenter.sh/nodepool=dsc",
			extra: "kubernetes.io/arch," + ComputedLabelNodeAge, width: 180},
		{name: "pending", in: mixedCluster(), view: View{ShowPending: true}, width: 120},
		{name: "disruption", in: mixedCluster(), view: View{ShowDisruption: true}, width: 160},
		{name: "narrow", in: mixedCluster(), width: 60},
		{name: "disable-pricing", in: mixedCluster(), disablePricing: true, width: 140},
		{name: "selector-paged", in: mixedCluster(), selector: "karpenter.sh/nodepool=default", view: View{Height: 11, Page: 1}, width: 140},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.resources == "" {
				tc.resources = "cpu"
			}
			if tc.sortBy == "" {
				tc.sortBy = "creation"
			}
			opts := mustOptions(t, tc.resources, tc.selector, tc.extra, tc.sortBy, tc.disablePricing)
			snap := Build(tc.in, opts, &Prices{}, nil)
			got := Render(snap, tc.view, tc.width, PlainStyle())
			for i, line := range strings.Split(got, "\n") {
				if w := len([]rune(line)); w > tc.width {
					t.Errorf("line %d is %d wide, more than %d: %q", i, w, tc.width, line)
				}
			}
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./pkg/viewer -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("render differs from %s (go test ./pkg/viewer -update rewrites it)\n--- got\n%s--- want\n%s", path, got, want)
			}
		})
	}
}

// TestStyleColours checks the colours are there in a colour terminal and
// absent in the plain style the goldens use.
func TestStyleColours(t *testing.T) {
	st, err := ParseStyle("#00ff00,#ffff00,#ff0000", colorprofile.TrueColor)
	if err != nil {
		t.Fatal(err)
	}
	snap := Build(mixedCluster(), Options{Resources: []corev1.ResourceName{corev1.ResourceCPU}}, &Prices{}, nil)
	out := Render(snap, View{}, 160, st)
	for _, want := range []string{"38;2;255;0;0", "38;2;0;255;0"} {
		if !strings.Contains(out, want) {
			t.Errorf("coloured render lacks %q", want)
		}
	}
	if plain := Render(snap, View{}, 160, PlainStyle()); strings.Contains(plain, "\x1b[") {
		t.Errorf("plain render has escape codes:\n%q", plain)
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 nodes"}, {1, "1 node"}, {2, "2 nodes"}} {
		if got := plural(tc.n, "node"); got != tc.want {
			t.Errorf("plural(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
