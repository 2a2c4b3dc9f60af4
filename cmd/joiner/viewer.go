package main

import (
	"os"

	"github.com/charmbracelet/colorprofile"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/viewer"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
)

// viewerFlags are eks-node-viewer's flags, with its names and defaults.
type viewerFlags struct {
	resources, nodeSelector, extraLabels, nodeSort, style, kubeconfig, context string
	disablePricing                                                             bool
}

func newViewerCommand() *cobra.Command {
	var f viewerFlags
	cmd := &cobra.Command{
		Use:   "viewer",
		Short: "Watch the cluster's nodes, their cost and how full they are, live",
		Long: `viewer shows every node with its instance type, capacity type, zone,
NodePool, hourly price, pod count, state, and a bar per resource of its pods'
requests over its allocatable; NodeClaims still launching show as nodes too.
Above them, the cluster's totals; below, where prices come from and how far
Joiner's nodes are from the LP lower bound of their pods' cost.

Prices: kwok nodes (provider ID kwok://) come from the embedded catalog; EC2
nodes (aws:///) from the controller's pricing code (the Price List API and
spot price history, with AWS credentials from the standard chain), or from
the catalog when there are no credentials, as the footer then says.

Keys: d toggles Joiner's disruption status under each node, p lists the
pending pods with the reason Joiner gave, ←/→ page, q quits.

The flags are eks-node-viewer's.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			profile := colorprofile.Detect(os.Stdout, os.Environ())
			opts, style, err := f.parse(profile)
			if err != nil {
				return err
			}
			cfg, err := kubeConfig(f.kubeconfig, f.context)
			if err != nil {
				return err
			}
			return viewer.Run(ctrl.SetupSignalHandler(), viewer.Config{Rest: cfg, Scheme: operator.Scheme(), Options: opts, Style: style})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.resources, "resources", "cpu", "List of comma separated resources to monitor")
	fl.StringVar(&f.nodeSelector, "node-selector", "", "Node label selector used to filter nodes, if empty all nodes are selected")
	fl.StringVar(&f.extraLabels, "extra-labels", "", "A comma separated set of extra node labels to display ("+viewer.ComputedLabelNodeAge+" is the node's age)")
	fl.StringVar(&f.nodeSort, "node-sort", viewer.SortCreation, "Sort order for the nodes, either 'creation' or a label name; add '=asc' or '=dsc' for the order")
	fl.StringVar(&f.style, "style", viewer.DefaultStyle, "Three colors for styling 'good', 'ok' and 'bad' values; also the bars' gradient")
	fl.BoolVar(&f.disablePricing, "disable-pricing", false, "Disable pricing lookups")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "Absolute path to the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "Name of the kubernetes context to use")
	return cmd
}

// parse checks every flag before anything connects, so a typo is reported
// with its flag and the fix rather than as a blank screen.
func (f viewerFlags) parse(profile colorprofile.Profile) (viewer.Options, viewer.Style, error) {
	var opts viewer.Options
	var err error
	if opts.Resources, err = viewer.ParseResources(f.resources); err != nil {
		return opts, viewer.Style{}, err
	}
	if opts.Selector, err = viewer.ParseSelector(f.nodeSelector); err != nil {
		return opts, viewer.Style{}, err
	}
	if opts.ExtraLabels, err = viewer.ParseExtraLabels(f.extraLabels); err != nil {
		return opts, viewer.Style{}, err
	}
	if opts.Sort, err = viewer.ParseSort(f.nodeSort); err != nil {
		return opts, viewer.Style{}, err
	}
	opts.DisablePricing = f.disablePricing
	style, err := viewer.ParseStyle(f.style, profile)
	return opts, style, err
}
