// Command joiner is Joiner's one binary: the controller by default, and
// offline tools as subcommands.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/spf13/cobra"
	// Root certificates for the AWS endpoints when the system has none, as
	// in Joiner's image, which holds the binary alone.
	_ "golang.org/x/crypto/x509roots/fallback"
	ctrl "sigs.k8s.io/controller-runtime"
)

// version is the release, set at build time (-ldflags "-X main.version=...",
// as make image does); a plain go build says "dev".
var version = "dev"

// versionLine is what --version prints: the release, and the platform, so
// that a binary taken out of a multi-arch image says which one it is.
func versionLine() string {
	return fmt.Sprintf("joiner %s %s/%s %s", version, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// softMemoryLimit is the Go memory limit for the container's memory limit,
// which the chart passes as MEMORY_LIMIT (bytes, from the downward API), so
// that the garbage collector works harder before the kernel kills the pod;
// ok is false when there is none to set, or an explicit GOMEMLIMIT wins. A
// MEMORY_LIMIT that is not a count of bytes stops the binary rather than
// leave the heap unbounded unnoticed.
// It is 70% of the limit: Go counts its own memory against it, but not the
// binary's pages mapped from disk, which the container's limit and its
// resident size also count (41 MiB in the scale run), and the collector,
// short of CPU on a busy node, overshoots it (by up to 39 MiB while 10,000
// pods started). At 90% a controller under a 300 MiB limit sat at
// 300-320 MiB resident through its churn; at 80% its high-water mark still
// reached 319-340 MiB.
func softMemoryLimit(getenv func(string) string) (limit int64, ok bool, err error) {
	v := getenv("MEMORY_LIMIT")
	if getenv("GOMEMLIMIT") != "" || v == "" {
		return 0, false, nil
	}
	limit, err = strconv.ParseInt(v, 10, 64)
	if err != nil || limit < 0 {
		return 0, false, fmt.Errorf("MEMORY_LIMIT=%q: want the container's memory limit in bytes, as the chart passes it from limits.memory (for example 314572800), or unset it", v)
	}
	if limit == 0 {
		return 0, false, nil
	}
	return limit / 10 * 7, true, nil
}

func main() {
	limit, ok, err := softMemoryLimit(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "joiner: "+err.Error())
		os.Exit(1)
	}
	if ok {
		debug.SetMemoryLimit(limit)
	}
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "joiner: "+err.Error())
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "joiner [settings]",
		Short: "Joiner provisions right-sized nodes for pending pods, speaking Karpenter's v1 API",
		Long: `Joiner runs the node autoscaler controller against the cluster in KUBECONFIG
(or the in-cluster configuration). Settings are Karpenter's, as flags or
environment variables: --batch-idle-duration or BATCH_IDLE_DURATION, and so on.
Run "joiner --help-settings" to list them.`,
		// Settings are parsed by operator.Parse so that flags and environment
		// variables share one definition and one error format.
		DisableFlagParsing: true,
		SilenceUsage:       true,
		SilenceErrors:      true,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if a == "--version" {
					fmt.Fprintln(cmd.OutOrStdout(), versionLine())
					return nil
				}
				if a == "--help" || a == "-h" || a == "--help-settings" {
					_, _ = operator.Parse([]string{"-h"}, os.Getenv)
					return nil
				}
			}
			opts, err := operator.Parse(args, os.Getenv)
			if err != nil {
				return err
			}
			return operator.Run(ctrl.SetupSignalHandler(), opts)
		},
	}
	root.AddCommand(newPlanCommand())
	root.AddCommand(newViewerCommand())
	root.AddCommand(newConvertCommand())
	root.AddCommand(newExplainCommand())
	root.AddCommand(newSimulateCommand())
	return root
}
