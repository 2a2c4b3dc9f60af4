// Command joiner is Joiner's one binary: the controller by default, and
// offline tools as subcommands.
package main

import (
	"fmt"
	"os"

	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
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
	return root
}
