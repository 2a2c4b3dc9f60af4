package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/simulate/record"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
)

func newRecordCommand() *cobra.Command {
	var out, auditLog, kubeconfig, kubeContext string
	var span time.Duration
	cmd := &cobra.Command{
		Use:   "record --out DIR [--audit-log FILE | --for DURATION]",
		Short: "Record a cluster's workload over time as a trace for joiner simulate",
		Long: `record writes what a cluster's workloads did as a trace that joiner simulate
replays: Deployments' and StatefulSets' replicas over time, the Jobs that
ran and for how long, the bare Pods that came and went, and NodePool
changes.

Without --audit-log it watches the cluster of the kubeconfig from now until
--for has passed or it is interrupted (Ctrl-C): the Deployments,
StatefulSets, Jobs, bare Pods, NodePools, EC2NodeClasses, DaemonSets,
PodDisruptionBudgets, PersistentVolumeClaims, PersistentVolumes,
StorageClasses and NodePools' nodes there at the start are the run's
manifests.
With --audit-log it reads an API server audit log (the JSON lines of
--audit-log-path), whose writes of Deployments, StatefulSets, Jobs, Pods
and NodePools must be logged at level Request or RequestResponse.

DIR gets trace.yaml, workload.yaml (the workloads) and cluster.yaml (the
NodePools and the rest, as at the start; from an audit log, the NodePools
it shows created). Replay with:

  joiner simulate -f DIR/cluster.yaml -f DIR/workload.yaml --trace DIR/trace.yaml --out REPORT`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out: give the directory to write the trace into")
			}
			if auditLog != "" && span > 0 {
				return fmt.Errorf("--for applies to watching a cluster; an --audit-log is read whole")
			}
			if span < 0 {
				return fmt.Errorf("--for %s: must be positive, such as 1h", span)
			}
			var rec *record.Recording
			var end time.Time
			if auditLog != "" {
				f, err := os.Open(auditLog)
				if err != nil {
					return fmt.Errorf("--audit-log: %w", err)
				}
				defer f.Close()
				if rec, end, err = record.ReadAudit(f); err != nil {
					return fmt.Errorf("--audit-log %s: %w", auditLog, err)
				}
			} else {
				cfg, err := kubeConfig(kubeconfig, kubeContext)
				if err != nil {
					return err
				}
				ctx := ctrl.SetupSignalHandler()
				if span > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, span)
					defer cancel()
				}
				clk := clock.RealClock{}
				if rec, err = record.Watch(ctx, cfg, operator.Scheme(), clk, func() {
					fmt.Fprintln(cmd.ErrOrStderr(), "recording; stop with Ctrl-C")
				}); err != nil {
					return err
				}
				end = clk.Now()
			}
			trace, workload, pools, err := rec.Finish(end)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out %s: %w", out, err)
			}
			if err := writeYAML(filepath.Join(out, "trace.yaml"), trace); err != nil {
				return err
			}
			if err := writeYAML(filepath.Join(out, "workload.yaml"), workload...); err != nil {
				return err
			}
			// Written even when empty, so that the replay command stands and
			// no older recording's file is read in its place.
			if err := writeYAML(filepath.Join(out, "cluster.yaml"), pools...); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "recorded %s: %d events, %d workloads (Deployments, StatefulSets, Jobs), and %d NodePools and other objects, into %s\n",
				trace.Duration.Duration, len(trace.Events), len(workload), len(pools), out)
			if unknown := rec.Unknown(); len(unknown) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "the trace scales workloads whose manifests the recording did not see (%s): give them to joiner simulate with -f\n", strings.Join(unknown, ", "))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "directory to write trace.yaml, workload.yaml and cluster.yaml into")
	fl.StringVar(&auditLog, "audit-log", "", "read this API server audit log (JSON lines) instead of watching the cluster")
	fl.DurationVar(&span, "for", 0, "watch for this long, such as 1h (default: until interrupted)")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "Absolute path to the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&kubeContext, "context", "", "Name of the kubernetes context to use")
	return cmd
}

// kubeConfig loads the kubeconfig as kubectl does: path when set, else
// $KUBECONFIG or ~/.kube/config, at kubeContext or the current context.
func kubeConfig(path, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig (--kubeconfig %q, --context %q): %w; kubectl config get-contexts lists the contexts", path, kubeContext, err)
	}
	return cfg, nil
}
