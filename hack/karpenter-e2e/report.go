package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// result is one spec's outcome.
type result struct {
	Group, File, Path, Name, State, Failure string
	Line                                    int
	Seconds                                 float64
}

// readReport reads ginkgo's JSON report: the fields it needs, by name, so
// that Joiner's module needs nothing of ginkgo.
func readReport(path, group string) ([]result, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the suite's report: %w", err)
	}
	var suites []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			LeafNodeType            string
			LeafNodeLocation        struct {
				FileName   string
				LineNumber int
			}
			State   string
			RunTime int64
			Failure struct {
				Message string
			}
		}
	}
	if err := json.Unmarshal(raw, &suites); err != nil {
		return nil, fmt.Errorf("reading the suite's report: %w", err)
	}
	var out []result
	for _, s := range suites {
		for _, r := range s.SpecReports {
			if r.LeafNodeType != "It" {
				continue
			}
			msg := strings.TrimSpace(r.Failure.Message)
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[:i]
			}
			out = append(out, result{Group: group, File: filepath.Base(r.LeafNodeLocation.FileName), Line: r.LeafNodeLocation.LineNumber,
				Path: strings.Join(r.ContainerHierarchyTexts, " / "), Name: r.LeafNodeText, State: r.State,
				Failure: msg, Seconds: time.Duration(r.RunTime).Seconds()})
		}
	}
	return out, nil
}

// merged is one result per spec across the groups: each group's report
// lists every spec of the suite, those it filtered out as skipped, so a
// spec's outcome is the one group that ran it.
func merged(rs []result) []result {
	index := map[string]int{}
	var out []result
	for _, r := range rs {
		key := fmt.Sprintf("%s:%d %s", r.File, r.Line, r.Name)
		i, seen := index[key]
		switch {
		case !seen:
			index[key] = len(out)
			out = append(out, r)
		case out[i].State == "skipped" && out[i].Failure == "" && r.State != "skipped":
			out[i] = r
		}
	}
	return out
}

// failed counts the specs that failed and are not named exceptions.
func failed(rs []result) int {
	n := 0
	for _, r := range rs {
		if r.State != "passed" && r.State != "skipped" && r.State != "pending" {
			n++
		}
	}
	return n
}

func tally(rs []result) string {
	counts := map[string]int{}
	for _, r := range rs {
		counts[r.State]++
	}
	var parts []string
	for _, k := range []string{"passed", "failed", "skipped", "timedout", "panicked", "interrupted", "aborted", "pending"} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	return strings.Join(parts, ", ")
}

// render is the report in Markdown: a summary, the named exceptions, and
// every spec by file.
func render(rs []result, gates, commit string, took time.Duration) string {
	rs = merged(rs)
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].File != rs[j].File {
			return rs[i].File < rs[j].File
		}
		return rs[i].Line < rs[j].Line
	})
	var b strings.Builder
	fmt.Fprintf(&b, "# Karpenter's regression suite against Joiner\n\n")
	fmt.Fprintf(&b, "`make karpenter-e2e` (hack/karpenter-e2e) builds `sigs.k8s.io/karpenter@v1.14.1`'s\n")
	fmt.Fprintf(&b, "`test/suites/regression` unchanged from the module proxy and runs it against\n")
	fmt.Fprintf(&b, "Joiner's kwok provider on the local control plane, with `FEATURE_GATES=%s`.\n", gates)
	fmt.Fprintf(&b, "This file is written by the run; its figures are the run's.\n\n")
	fmt.Fprintf(&b, "Run on %s at Joiner %s, %d specs in %s: %s.\n\n", time.Now().UTC().Format("2006-01-02"), commit, len(rs), took.Round(time.Second), tally(rs))
	fmt.Fprintf(&b, "## Named exceptions\n\nSkipped, because they test Karpenter's internals rather than its API:\n\n")
	for name, why := range exceptions {
		fmt.Fprintf(&b, "- \"%s\": %s\n", name, why)
	}
	fmt.Fprintf(&b, "\n## Every spec\n\n| file:line | group | spec | result | seconds | failure |\n|---|---|---|---|---|---|\n")
	for _, r := range rs {
		state := r.State
		if _, ok := exceptions[r.Name]; ok && state == "skipped" {
			state = "skipped (exception)"
		}
		fmt.Fprintf(&b, "| %s:%d | %s | %s | %s | %.0f | %s |\n", r.File, r.Line, r.Group, cell(r.Path+" / "+r.Name), state, r.Seconds, cell(r.Failure))
	}
	return b.String()
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func regexpQuote(s string) string { return regexp.QuoteMeta(s) }
