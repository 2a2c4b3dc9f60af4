// Command optimum grades Joiner's plans against the best integer plan,
// offline. For each workload it renders the manifests, plans them as
// `joiner plan` does, and computes three baselines:
//
//   - the assignment LP bound (pkg/lpbound.Bound), which splits pods;
//   - the configuration LP (pkg/lpbound.Patterns): whole pods on whole
//     nodes, fractional node counts, solved by column generation, with a
//     certified lower bound on every integer plan (the higher of it and the
//     assignment LP's is the "integer lower bound");
//   - the integer program over the generated patterns, solved by CBC
//     (coinor-cbc, from Debian): a real plan, so an upper bound on the
//     integer optimum.
//
// The integer optimum lies between the last two; their ratio is the
// certificate. CBC is never used at run time; it is the referee here.
//
//	go run ./hack/optimum                 # all workloads, a Markdown table
//	go run ./hack/optimum -write DIR      # the manifests, for joiner plan -f
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/lpbound"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

func main() {
	write := flag.String("write", "", "write each workload's manifests to DIR/<name>.yaml and exit")
	only := flag.String("run", "", "only workloads whose name matches this regular expression")
	sec := flag.Int("sec", 120, "CBC's time limit per workload, seconds")
	keep := flag.String("keep", "", "keep CBC's model and solution files in DIR")
	random := flag.Int("random", 0, "grade this many random mixes (random.go) instead of the held workloads, with their median and 95th percentile")
	seed := flag.Uint64("seed", 1, "the first random mix's seed; the others follow")
	commitments := flag.Bool("commitments", false, "instead of grading, price each workload's plan at list prices and its plan with a commitment mix (commitments.go) on the bill under that mix; with -random, grade each mix's plan under its commitment mix against the best integer plan on that bill (mipcommit.go)")
	flag.Parse()
	if *random > 0 {
		randomMixes = make([]workload, *random)
		for i := range randomMixes {
			randomMixes[i] = randomWorkload(*seed + uint64(i))
		}
	}
	gradeWithCommitments = *commitments
	if err := run(*write, *only, *sec, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "optimum:", err)
		os.Exit(1)
	}
}

// randomMixes, when set (-random), are graded instead of workloads().
var randomMixes []workload

// gradeWithCommitments (-commitments) prices plans under commitments
// instead of grading them against CBC.
var gradeWithCommitments bool

func graded() []workload {
	if len(randomMixes) > 0 {
		return randomMixes
	}
	return workloads()
}

func run(write, only string, sec int, keep string) error {
	re, err := regexp.Compile(only)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	if write != "" {
		if err := os.MkdirAll(write, 0o755); err != nil {
			return err
		}
		for _, w := range graded() {
			if err := os.WriteFile(filepath.Join(write, w.name+".yaml"), []byte(w.yaml()), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		return err
	}
	if gradeWithCommitments && len(randomMixes) == 0 {
		dir, err := os.MkdirTemp("", "optimum-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		var ws []workload
		for _, w := range graded() {
			if re.MatchString(w.name) {
				ws = append(ws, w)
			}
		}
		return gradeCommitments(ws, its, dir)
	}
	if _, err := exec.LookPath("cbc"); err != nil {
		return fmt.Errorf("cbc not found: install Debian's coinor-cbc (apt-get install coinor-cbc)")
	}
	dir, err := os.MkdirTemp("", "optimum-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if keep != "" {
		dir = keep
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if gradeWithCommitments {
		return gradeRandomCommitted(its, dir, sec)
	}
	fmt.Println("| workload | set | pods | plan $/h | nodes | plan time | LP bound $/h | integer lower bound $/h | best integer $/h | plan ÷ LP bound | plan ÷ best integer | plan ÷ integer lower bound | best integer ÷ lower bound | baseline time |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	var toBest, toLower []float64
	for _, w := range graded() {
		if !re.MatchString(w.name) {
			continue
		}
		r, err := grade(w, its, dir, sec)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", w.name, w.about, err)
		}
		toBest, toLower = append(toBest, r.plan/r.integer), append(toLower, r.plan/r.lower)
		fmt.Printf("| %s | %s | %d | %.2f | %d | %s | %.2f | %.2f | %.2f%s | %.3f | **%.3f** | %.3f | %.4f | %s |\n",
			w.name, w.set, r.pods, r.plan, r.nodes, r.planTime.Round(time.Millisecond), r.lp, r.lower, r.integer, r.status,
			r.plan/r.lp, r.plan/r.integer, r.plan/r.lower, r.integer/r.lower, r.baseTime.Round(100*time.Millisecond))
	}
	if len(randomMixes) > 0 {
		fmt.Printf("\n%d mixes: plan ÷ best integer median %.4f, 95th percentile %.4f, worst %.4f; plan ÷ integer lower bound median %.4f, 95th percentile %.4f\n",
			len(toBest), quantile(toBest, 0.5), quantile(toBest, 0.95), quantile(toBest, 1), quantile(toLower, 0.5), quantile(toLower, 0.95))
		for _, w := range randomMixes {
			fmt.Printf("- %s: %s\n", w.name, w.about)
		}
	}
	return nil
}

type result struct {
	pods, nodes     int
	plan, lp, lower float64
	integer         float64
	// bound is CBC's bound on the best integer plan over its patterns.
	bound              float64
	status             string
	planTime, baseTime time.Duration
}

func grade(w workload, its []*cloudprovider.InstanceType, dir string, sec int) (result, error) {
	var g result
	snap, err := snapshotOf(w, its, dir)
	if err != nil {
		return g, err
	}
	g.pods = len(snap.Pods)
	start := time.Now()
	plan := scheduling.Solve(snap, scheduling.Options{})
	g.planTime = time.Since(start)
	if len(plan.Unschedulable) > 0 {
		return g, fmt.Errorf("%d pods unschedulable: %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
	g.plan, g.nodes = plan.TotalPrice(), len(plan.NewNodeClaims)
	if g.lp, err = scheduling.LowerBound(snap); err != nil {
		return g, err
	}
	start = time.Now()
	m := scheduling.PackingModel(snap)
	seed := planPatterns(m, plan)
	res, err := lpbound.Patterns(m.Kinds, m.Shapes, m.Limits, lpbound.PatternOptions{Knapsack: cbcKnapsack(dir), Seed: seed})
	if err != nil {
		return g, err
	}
	for s, u := range res.Uncovered {
		if u > 1e-6 {
			return g, fmt.Errorf("the configuration LP cannot cover %.1f pods of shape %s", u, m.Shapes[s].Name)
		}
	}
	// Both bounds hold for every plan of the model (the assignment LP
	// relaxes it further), so the higher one is the certificate; the
	// configuration LP's is the higher unless pricing was cut short.
	g.lower = max(res.Bound, g.lp)
	g.integer, _, g.status, err = solveMIP(filepath.Join(dir, w.name), m, res, sec, mipTerms{})
	g.baseTime = time.Since(start)
	return g, err
}

// snapshotOf is the workload's snapshot, its manifests written to dir
// and read back as `joiner plan` reads them.
func snapshotOf(w workload, its []*cloudprovider.InstanceType, dir string) (scheduling.Snapshot, error) {
	path, err := writeWorkload(dir, w)
	if err != nil {
		return scheduling.Snapshot{}, err
	}
	objs, err := manifests.LoadFiles([]string{path})
	if err != nil {
		return scheduling.Snapshot{}, err
	}
	snap, problems := objs.Snapshot(its)
	if len(problems) > 0 {
		return scheduling.Snapshot{}, fmt.Errorf("nodepool %s: %s", problems[0].NodePool, problems[0].Reason)
	}
	return snap, nil
}

// writeWorkload writes the workload's manifests to DIR/<name>.yaml.
func writeWorkload(dir string, w workload) (string, error) {
	path := filepath.Join(dir, w.name+".yaml")
	return path, os.WriteFile(path, []byte(w.yaml()), 0o644)
}

// planPatterns are the plan's nodes as patterns of m, so the integer
// program can always do at least as well as the plan and is graded on
// whether it does better.
func planPatterns(m scheduling.Packing, plan *scheduling.Plan) []lpbound.Pattern {
	kindIdx := map[string]int{}
	for i, k := range m.Kinds {
		kindIdx[k.Name] = i
	}
	shapeIdx := map[string]int{}
	for i, s := range m.Shapes {
		shapeIdx[s.Name] = i
	}
	var out []lpbound.Pattern
	for _, nc := range plan.NewNodeClaims {
		k, ok := kindIdx[nc.NodePool+"/"+nc.InstanceType.Name+"/"+nc.Offering.Zone]
		if !ok {
			k, ok = kindIdx[nc.NodePool+"/"+nc.InstanceType.Name+"/"]
		}
		if !ok {
			continue
		}
		counts := make([]int, len(m.Shapes))
		for _, pod := range nc.Pods {
			name := m.ShapeOf[pod]
			if s, ok := shapeIdx[name+"/"+nc.Offering.Zone]; ok {
				counts[s]++
			} else if s, ok := shapeIdx[name]; ok {
				counts[s]++
			}
		}
		out = append(out, lpbound.Pattern{Kind: k, Counts: counts})
	}
	return out
}

// solveMIP writes the integer program over res's patterns in CPLEX LP
// format, with extra's terms and rows, runs CBC on it and returns the
// best integer plan's $/h, CBC's bound on it over these patterns (the
// same when proven optimal) and CBC's status ("" when proven optimal).
func solveMIP(base string, m scheduling.Packing, res lpbound.PatternResult, sec int, extra mipTerms) (obj, bound float64, status string, err error) {
	var b bytes.Buffer
	b.WriteString("Minimize\n obj:")
	for i, p := range res.Patterns {
		fmt.Fprintf(&b, " + %.10g x%d", m.Kinds[p.Kind].Price, i)
		if i%8 == 7 {
			b.WriteString("\n")
		}
	}
	for i, term := range extra.objective {
		fmt.Fprintf(&b, " %s", term)
		if i%8 == 7 {
			b.WriteString("\n")
		}
	}
	b.WriteString("\nSubject To\n")
	for _, row := range extra.rows {
		b.WriteString(row + "\n")
	}
	for s, sh := range m.Shapes {
		if sh.Count <= 0 {
			continue
		}
		var terms []string
		for i, p := range res.Patterns {
			if p.Counts[s] > 0 {
				terms = append(terms, fmt.Sprintf("%d x%d", p.Counts[s], i))
			}
		}
		if len(terms) == 0 {
			continue // requests nothing: free
		}
		fmt.Fprintf(&b, " s%d: %s >= %d\n", s, strings.Join(terms, " + "), int(math.Ceil(sh.Count-1e-9)))
	}
	for l, lim := range m.Limits {
		use := map[int]float64{}
		for i, k := range lim.Kinds {
			use[k] = lim.Use[i]
		}
		var terms []string
		for i, p := range res.Patterns {
			if u, ok := use[p.Kind]; ok && u > 0 {
				terms = append(terms, fmt.Sprintf("%.10g x%d", u, i))
			}
		}
		if len(terms) > 0 {
			fmt.Fprintf(&b, " l%d: %s <= %.10g\n", l, strings.Join(terms, " + "), lim.Max)
		}
	}
	b.WriteString("General\n")
	for i := range res.Patterns {
		fmt.Fprintf(&b, " x%d", i)
	}
	b.WriteString("\nEnd\n")
	if err := os.WriteFile(base+".lp", b.Bytes(), 0o644); err != nil {
		return 0, 0, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(2*sec+60)*time.Second)
	defer cancel()
	args := []string{base + ".lp"}
	if len(extra.start) > 0 {
		var st bytes.Buffer
		st.WriteString("Feasible - objective value 0\n")
		for _, i := range slices.Sorted(maps.Keys(extra.start)) {
			fmt.Fprintf(&st, "%d x%d %d 0\n", i, i, extra.start[i])
		}
		if err := os.WriteFile(base+".start", st.Bytes(), 0o644); err != nil {
			return 0, 0, "", err
		}
		// CBC's preprocessing loses the start (it "could not be used to
		// build a solution"); without it, the start's plan is found at once.
		args = append(args, "-mipstart", base+".start", "-preprocess", "off")
	}
	cmd := exec.CommandContext(ctx, "cbc", append(args, "-timeMode", "elapsed", "-sec", strconv.Itoa(sec), "-ratioGap", "0", "-allowableGap", "0.0001", "-threads", "2", "-solve", "-solution", base+".sol")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, "", fmt.Errorf("cbc: %v\n%s", err, out)
	}
	head, _, err := readSolution(base + ".sol")
	if err != nil {
		return 0, 0, "", fmt.Errorf("cbc wrote no solution: %v\n%s", err, out)
	}
	i := strings.LastIndex(head, "objective value")
	if i < 0 {
		return 0, 0, "", fmt.Errorf("cbc: %s", head)
	}
	obj, err = strconv.ParseFloat(strings.TrimSpace(head[i+len("objective value"):]), 64)
	if err != nil {
		return 0, 0, "", fmt.Errorf("cbc: %s", head)
	}
	bound = obj
	if !strings.HasPrefix(head, "Optimal") {
		status = " (" + strings.TrimSpace(head[:strings.Index(head, " - ")]) + ")"
		if m := bestPossible.FindSubmatch(out); m != nil {
			if b, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
				bound = b
			}
		}
	}
	return obj, bound, status, nil
}

// bestPossible is CBC's bound in its log when it stops short.
var bestPossible = regexp.MustCompile(`best possible ([0-9.]+)`)

// cbcKnapsack solves pricing problems that branch and bound left open.
func cbcKnapsack(dir string) func([]float64, []lpbound.KnapsackItem, float64) ([]int, error) {
	return func(capacity []float64, items []lpbound.KnapsackItem, gap float64) ([]int, error) {
		var b bytes.Buffer
		b.WriteString("Maximize\n obj:")
		for i, it := range items {
			fmt.Fprintf(&b, " + %.15g z%d", it.Value, i)
		}
		b.WriteString("\nSubject To\n")
		for r, c := range capacity {
			var terms []string
			for i, it := range items {
				if it.Request[r] > 0 {
					terms = append(terms, fmt.Sprintf("%.15g z%d", it.Request[r]/c, i))
				}
			}
			if len(terms) > 0 { // rows in shares of the node, for CBC's tolerances
				fmt.Fprintf(&b, " r%d: %s <= 1\n", r, strings.Join(terms, " + "))
			}
		}
		b.WriteString("Bounds\n")
		for i, it := range items {
			fmt.Fprintf(&b, " 0 <= z%d <= %d\n", i, it.Max)
		}
		b.WriteString("General\n")
		for i := range items {
			fmt.Fprintf(&b, " z%d", i)
		}
		b.WriteString("\nEnd\n")
		base := filepath.Join(dir, "knapsack")
		if err := os.WriteFile(base+".lp", b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		out, err := exec.Command("cbc", base+".lp", "-timeMode", "elapsed", "-sec", "5", "-ratioGap", strconv.FormatFloat(gap, 'g', -1, 64), "-integerTolerance", "1e-9", "-solve", "-solution", base+".sol").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("cbc: %v\n%s", err, out)
		}
		head, vals, err := readSolution(base + ".sol")
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(head, "Optimal") {
			return nil, fmt.Errorf("cbc: %s", head)
		}
		z := make([]int, len(items))
		for name, v := range vals {
			i, err := strconv.Atoi(strings.TrimPrefix(name, "z"))
			if err != nil || i < 0 || i >= len(z) {
				continue
			}
			z[i] = int(math.Round(v))
		}
		return z, nil
	}
}

// readSolution reads CBC's solution file: the status line and the
// non-zero variables.
func readSolution(path string) (string, map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return "", nil, fmt.Errorf("%s is empty", path)
	}
	head := sc.Text()
	vals := map[string]float64{}
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 3 {
			if v, err := strconv.ParseFloat(fs[2], 64); err == nil {
				vals[fs[1]] = v
			}
		}
	}
	return head, vals, sc.Err()
}
