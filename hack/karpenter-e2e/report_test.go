package main

import (
	"strings"
	"testing"
)

func TestMerged(t *testing.T) {
	cases := []struct {
		name string
		in   []result
		want []string // File:State per merged spec
	}{
		{
			name: "the group that ran a spec gives its outcome, whichever reported first",
			in: []result{
				{Group: "core", File: "a.go", Line: 1, Name: "x", State: "skipped"},
				{Group: "pinned", File: "a.go", Line: 1, Name: "x", State: "failed", Failure: "boom"},
			},
			want: []string{"a.go:failed"},
		},
		{
			name: "a spec skipped after an ordered container failed keeps its message",
			in: []result{
				{Group: "core", File: "b.go", Line: 2, Name: "y", State: "skipped", Failure: "Spec skipped because an earlier spec in an ordered container failed"},
				{Group: "pinned", File: "b.go", Line: 2, Name: "y", State: "skipped"},
			},
			want: []string{"b.go:skipped"},
		},
		{
			name: "specs of the same name on different lines stay apart",
			in: []result{
				{Group: "core", File: "c.go", Line: 3, Name: "z", State: "passed"},
				{Group: "core", File: "c.go", Line: 9, Name: "z", State: "failed"},
			},
			want: []string{"c.go:passed", "c.go:failed"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range merged(tc.in) {
				got = append(got, r.File+":"+r.State)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("merged = %v, want %v", got, tc.want)
			}
			if n := failed(merged(tc.in)); n != strings.Count(strings.Join(tc.want, ","), "failed") {
				t.Fatalf("failed = %d", n)
			}
		})
	}
}

// Core goes alone beside the others; without -parallel, or with core
// alone selected, there is one lane.
func TestLanes(t *testing.T) {
	names := func(ls [][]group) string {
		var out []string
		for _, l := range ls {
			var n []string
			for _, g := range l {
				n = append(n, g.Name)
			}
			out = append(out, strings.Join(n, "+"))
		}
		return strings.Join(out, " | ")
	}
	for _, tc := range []struct {
		only     string
		parallel bool
		want     string
	}{
		{"core,pinned,buffers", true, "core | pinned+buffers"},
		{"core,pinned,buffers", false, "core+pinned+buffers"},
		{"buffers,pinned", true, "pinned+buffers"},
		{"core", true, "core"},
	} {
		if got := names(lanes(selected(tc.only), tc.parallel)); got != tc.want {
			t.Errorf("lanes(%q, %v) = %q, want %q", tc.only, tc.parallel, got, tc.want)
		}
	}
}
