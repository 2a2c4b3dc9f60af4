package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/simulate"
	"github.com/joiner-autoscaler/joiner/pkg/simulate/report"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"sigs.k8s.io/yaml"
)

func newSimulateCommand() *cobra.Command {
	var files, compare, zones []string
	var region, tracePath, generate, out, gates, commitmentsPath string
	var peak int
	var duration time.Duration
	t := simulate.DefaultTiming()
	var policies map[string]*string
	cmd := &cobra.Command{
		Use:   "simulate -f MANIFEST... (--trace FILE | --generate diurnal|burst|walk) --out DIR",
		Short: "Replay a workload over simulated time through Joiner's own decisions, and report cost, nodes and disruptions",
		Long: `simulate replays a day (or any span) of a cluster in seconds: pods arriving
and leaving, nodes launching, consolidation, drift, expiry, spot
interruptions and capacity shortages, with the provisioning and disruption
decisions made by the same code the controller runs, on a simulated clock,
with no cluster.

-f gives the NodePools, EC2NodeClasses, DaemonSets, workloads
(Deployments, StatefulSets, ReplicaSets, Jobs, bare Pods), storage
(PersistentVolumeClaims, PersistentVolumes, StorageClasses), Nodes to start
from and PodDisruptionBudgets. --trace replays a file of timed events (docs/simulate.md);
--generate makes one (diurnal, burst, walk) peaking near --peak pods, over
20 Deployments of assorted shapes when -f has none, and writes it, with
those Deployments, into --out.

--compare FILE runs the same trace again with FILE's objects in place of
-f's of the same kind and name (a NodePool with another
consolidationPolicy, say); repeat it for more configurations.

--commitments FILE prices every configuration on the bill under the
account's Reserved Instances and Savings Plans (the format of joiner plan
--commitments, docs/cost.md): plans fill them first, consolidation weighs
what the bill saves, spend caps count effective prices, and totalCost is
the bill's (listCost the same nodes at list prices).

--out gets report.html (plots and tables in one file), one PNG and SVG per
plot, summary.json (totalCost, lpBoundCost, nodeHours, evictions,
pendingSecondsP50, pendingSecondsP99, peakNodes, ...; one per configuration
under configurations) and results.json (the time series and every
disruption command).`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A simulation is a batch job whose heap is a few hundred MB of
			// short-lived plans: collecting at 5x the live heap rather than
			// 2x took a 20-minute stretch of the diurnal day from 34 s to
			// 25 s. GOGC, when set, is the user's choice.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(400)
			}
			if len(files) == 0 {
				return fmt.Errorf("no manifests: pass -f FILE with at least a NodePool and its EC2NodeClass")
			}
			if out == "" {
				return fmt.Errorf("--out: give the directory to write the report into")
			}
			if (tracePath == "") == (generate == "") {
				return fmt.Errorf("give exactly one of --trace FILE and --generate %s", strings.Join(simulate.Generators, "|"))
			}
			sched, err := planningSettings(cmd, policies)
			if err != nil {
				return err
			}
			fg, err := operator.ParseFeatureGates(gates)
			if err != nil {
				return fmt.Errorf("--feature-gates: %w", err)
			}
			its, err := catalog.InstanceTypes(catalog.Options{Region: region, Zones: zones})
			if err != nil {
				return err
			}
			base, err := manifests.LoadFiles(files)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out %s: %w", out, err)
			}
			var trace *simulate.Trace
			var source string
			if tracePath != "" {
				if trace, err = simulate.ReadTrace(tracePath); err != nil {
					return fmt.Errorf("--trace: %w", err)
				}
				source = tracePath
			} else {
				var added []any
				if trace, added, err = simulate.Generate(generate, base, peak, duration, t.Seed); err != nil {
					return err
				}
				source = fmt.Sprintf("generated %s, peak %d pods, %s, seed %d (trace.yaml and workload.yaml)", generate, peak, duration, t.Seed)
				if err := writeGenerated(out, trace, added); err != nil {
					return err
				}
			}
			var cm *commitment.Commitments
			if commitmentsPath != "" {
				read, err := commitment.ReadFile(commitmentsPath, its)
				if err != nil {
					return err
				}
				cm = &read
			}
			configs := []simulate.Config{{Name: configName(files[0]), Objects: base}}
			for _, f := range compare {
				over, err := manifests.LoadFiles([]string{f})
				if err != nil {
					return fmt.Errorf("--compare: %w", err)
				}
				configs = append(configs, simulate.Config{Name: configName(f), Objects: simulate.Override(base, over)})
			}
			var names []string
			for i := range configs {
				configs[i].InstanceTypes, configs[i].Scheduling, configs[i].Timing = its, sched, t
				configs[i].SpotToSpot = fg.SpotToSpotConsolidation
				configs[i].StaticCapacity = fg.StaticCapacity
				configs[i].Commitments = cm
				names = append(names, configs[i].Name)
			}
			results, err := runAll(configs, trace, progress(cmd.ErrOrStderr(), strings.Join(names, ", ")))
			if err != nil {
				return err
			}
			if err := report.Write(out, source, results); err != nil {
				return err
			}
			for _, r := range results {
				s := r.Summary
				lost := ""
				if s.LostPods > 0 {
					lost = fmt.Sprintf(" (%d bare pods lost)", s.LostPods)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: $%.2f (LP bound $%.2f), %.1f node-hours, peak %d nodes, %d evictions%s, pending p50 %.0fs p99 %.0fs\n",
					s.Config, s.TotalCost, s.LPBoundCost, s.NodeHours, s.PeakNodes, s.Evictions, lost, s.PendingSecondsP50, s.PendingSecondsP99)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(out, "report.html"))
			return nil
		},
	}
	cmd.AddCommand(newRecordCommand())
	f := cmd.Flags()
	f.StringSliceVarP(&files, "filename", "f", nil, "manifests: NodePools, EC2NodeClasses, DaemonSets, Deployments, Jobs, PodDisruptionBudgets")
	f.StringArrayVar(&compare, "compare", nil, "a manifest whose objects replace -f's of the same kind and name: one more configuration to run")
	f.StringVar(&tracePath, "trace", "", "a trace file of timed events (docs/simulate.md)")
	f.StringVar(&generate, "generate", "", "generate the trace: diurnal, burst or walk")
	f.IntVar(&peak, "peak", 2000, "the generated trace's peak, in pods")
	f.DurationVar(&duration, "duration", 24*time.Hour, "the generated trace's length")
	f.Int64Var(&t.Seed, "seed", t.Seed, "seed of the generated trace and of spot interruptions")
	f.StringVar(&out, "out", "", "directory for report.html, the plots, summary.json and results.json")
	f.StringVar(&region, "region", catalog.DefaultRegion, "catalog region")
	f.StringSliceVar(&zones, "zones", nil, "catalog zones (default: <region>a,b,c)")
	f.StringVar(&commitmentsPath, "commitments", "", "a YAML file of the account's Reserved Instances and Savings Plans (docs/cost.md): every configuration is priced on the bill under them")
	f.StringVar(&gates, "feature-gates", "", "feature gates, as the controller's FEATURE_GATES (SpotToSpotConsolidation=true, StaticCapacity=true)")
	f.DurationVar(&t.BatchIdle, "batch-idle-duration", t.BatchIdle, "as the controller's BATCH_IDLE_DURATION")
	f.DurationVar(&t.BatchMax, "batch-max-duration", t.BatchMax, "as the controller's BATCH_MAX_DURATION")
	f.DurationVar(&t.DisruptionPoll, "disruption-poll", t.DisruptionPoll, "as the controller's DISRUPTION_POLL")
	f.DurationVar(&t.Launch, "launch-delay", t.Launch, "from a NodeClaim's creation to its Node registering")
	f.DurationVar(&t.Initialize, "initialize-delay", t.Initialize, "from a Node registering to its NodeClaim initializing")
	f.DurationVar(&t.Drain, "drain-delay", t.Drain, "from a node's pods being evicted to its instance terminating")
	f.DurationVar(&t.Sample, "sample", t.Sample, "interval of the time series")
	f.Float64Var(&t.SpotInterruptionsPerHour, "spot-interruptions-per-hour", 0, "chance per hour that AWS interrupts each spot instance")
	policies = planningFlags(cmd)
	return cmd
}

// configName names a configuration by its file.
func configName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// runAll runs the configurations side by side, at most one per core: each
// run is deterministic and shares nothing it writes, so the results are
// those of running them one after another. bar, when set, shows their
// mean progress.
func runAll(configs []simulate.Config, trace *simulate.Trace, bar func(float64)) ([]*simulate.Result, error) {
	results := make([]*simulate.Result, len(configs))
	errs := make([]error, len(configs))
	var mu sync.Mutex
	done := make([]float64, len(configs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range configs {
		var report func(float64)
		if bar != nil {
			report = func(f float64) {
				mu.Lock()
				defer mu.Unlock()
				done[i] = f
				sum := 0.0
				for _, d := range done {
					sum += d
				}
				bar(sum / float64(len(done)))
			}
		}
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			results[i], errs[i] = simulate.Run(configs[i], trace, report)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", configs[i].Name, err)
		}
	}
	return results, nil
}

// progress is a progress bar on a terminal, and nothing elsewhere.
func progress(w io.Writer, what string) func(float64) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	bar := progressbar.NewOptions(1000, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionClearOnFinish())
	return func(done float64) { _ = bar.Set(int(done * 1000)) }
}

// writeGenerated writes a generated trace and the workloads it added, so
// that the run can be repeated with --trace.
func writeGenerated(dir string, trace *simulate.Trace, added []any) error {
	if err := writeYAML(filepath.Join(dir, "trace.yaml"), trace); err != nil {
		return err
	}
	return writeYAML(filepath.Join(dir, "workload.yaml"), added...)
}

// writeYAML writes objs to path as YAML documents.
func writeYAML(path string, objs ...any) error {
	var docs []string
	for _, obj := range objs {
		raw, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		docs = append(docs, string(raw))
	}
	return os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o644)
}
