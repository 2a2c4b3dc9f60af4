package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/overlay"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	"github.com/spf13/cobra"
)

func newPlanCommand() *cobra.Command {
	var files, zones []string
	var region, output, commitmentsPath string
	var policies map[string]*string
	cmd := &cobra.Command{
		Use:   "plan -f FILE...",
		Short: "Show, offline, the NodeClaims Joiner would create for some manifests",
		Long: `plan reads NodePools, EC2NodeClasses and workloads (Deployments, StatefulSets,
ReplicaSets, Jobs, Pods, DaemonSets) and optionally Nodes with their pods as
existing capacity, and prints the NodeClaims the controller would create,
priced with the embedded EC2 catalog. Nothing is applied anywhere.

PersistentVolumeClaims, PersistentVolumes and StorageClasses in the manifests
pin pods to their volumes' zones and count against attach limits, as in the
cluster; StatefulSets' volumeClaimTemplates make their claims. A claim or
StorageClass the manifests do not hold constrains nothing.

NodeOverlays (karpenter.sh/v1alpha1) in the manifests reprice and resize the
instance types they select, as the controller does with its NodeOverlay
feature gate on; the output says which apply.

--commitments reads the account's Reserved Instances and Savings Plans
(docs/cost.md gives the format): the plan fills them first, as the
controller does with the ones it reads from AWS.

-o json gives each NodeClaim's price as the plan priced it (overlays and
commitments' rooms included), its list price, and its effective price
on the bill under the commitments, with the totals.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("no manifests: pass -f FILE (or -f - for standard input)")
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("unknown output %q: use -o table or -o json", output)
			}
			objs, err := manifests.LoadFiles(files)
			if err != nil {
				return err
			}
			if len(objs.PodDisruptionBudgets) > 0 {
				return fmt.Errorf("PodDisruptionBudget %s/%s: a plan evicts nothing, so PDBs change nothing; remove them from -f, or use joiner simulate, which evicts", objs.PodDisruptionBudgets[0].Namespace, objs.PodDisruptionBudgets[0].Name)
			}
			opts, err := planningSettings(cmd, policies)
			if err != nil {
				return err
			}
			its, err := catalog.InstanceTypes(catalog.Options{Region: region, Zones: zones})
			if err != nil {
				return err
			}
			snap, problems := objs.Snapshot(its)
			var cm commitment.Commitments
			if commitmentsPath != "" {
				if cm, err = commitment.ReadFile(commitmentsPath, its); err != nil {
					return err
				}
				snap = scheduling.WithCommitments(cm, snap)
			}
			plan := scheduling.Solve(snap, opts)
			doc := toDocument(plan, problems, its, scheduling.Bill(cm, snap, plan))
			doc.NodeOverlays = overlayDocs(objs.OverlayVerdicts)
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(doc)
			}
			printTable(cmd.OutOrStdout(), doc, problems)
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest files (multi-document YAML); - reads standard input")
	cmd.Flags().StringVar(&region, "region", catalog.DefaultRegion, "catalog region")
	cmd.Flags().StringSliceVar(&zones, "zones", nil, "catalog zones (default: <region>a,b,c)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().StringVar(&commitmentsPath, "commitments", "", "a YAML file of the account's Reserved Instances and Savings Plans (docs/cost.md): the plan fills them first, and prices NodeClaims on the bill")
	policies = planningFlags(cmd)
	return cmd
}

// Document is the JSON form of a plan.
type Document struct {
	NodeClaims        []NodeClaimDoc `json:"nodeClaims"`
	UnschedulablePods []PodDoc       `json:"unschedulablePods"`
	TotalPricePerHour float64        `json:"totalPricePerHour"`
	// TotalListPricePerHour and TotalEffectivePricePerHour sum the
	// NodeClaims' list and effective prices.
	TotalListPricePerHour      float64 `json:"totalListPricePerHour"`
	TotalEffectivePricePerHour float64 `json:"totalEffectivePricePerHour"`
	// NodeOverlays say which of the manifests' overlays apply, and why
	// not where one does not.
	NodeOverlays []OverlayDoc `json:"nodeOverlays,omitempty"`
}

// OverlayDoc is a NodeOverlay's verdict.
type OverlayDoc struct {
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

func overlayDocs(verdicts map[string]overlay.Verdict) []OverlayDoc {
	var out []OverlayDoc
	for name, v := range verdicts {
		out = append(out, OverlayDoc{Name: name, Applied: v.Applied, Reason: v.Reason, Message: v.Message})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NodeClaimDoc is one planned NodeClaim.
type NodeClaimDoc struct {
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType"`
	CapacityType string `json:"capacityType"`
	Zone         string `json:"zone"`
	// PricePerHour is what the plan priced the NodeClaim at, NodeOverlays
	// and commitments' rooms included; ListPricePerHour is the catalog's
	// price of the offering; EffectivePricePerHour is what it adds to the
	// bill under the commitments (--commitments), its share of them
	// applied in AWS's order to the existing nodes and the plan.
	PricePerHour          float64 `json:"pricePerHour"`
	ListPricePerHour      float64 `json:"listPricePerHour"`
	EffectivePricePerHour float64 `json:"effectivePricePerHour"`
	Pods                  int     `json:"pods"`
}

// PodDoc is a pod that cannot be placed.
type PodDoc struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

func toDocument(plan *scheduling.Plan, problems []state.NodePoolProblem, catalog []*cloudprovider.InstanceType, effective map[*scheduling.NewNodeClaim]float64) Document {
	doc := Document{NodeClaims: []NodeClaimDoc{}, UnschedulablePods: []PodDoc{}}
	listed := map[[3]string]float64{}
	for _, it := range catalog {
		for _, o := range it.Offerings {
			listed[[3]string{it.Name, o.Zone, o.CapacityType}] = o.Price
		}
	}
	for _, nc := range plan.NewNodeClaims {
		list, ok := listed[[3]string{nc.InstanceType.Name, nc.Offering.Zone, nc.Offering.CapacityType}]
		if !ok {
			list = nc.Price()
		}
		doc.NodeClaims = append(doc.NodeClaims, NodeClaimDoc{NodePool: nc.NodePool, InstanceType: nc.InstanceType.Name,
			CapacityType: nc.Offering.CapacityType, Zone: nc.Offering.Zone, PricePerHour: round(nc.Price()), ListPricePerHour: round(list),
			EffectivePricePerHour: round(effective[nc]), Pods: len(nc.Pods)})
		doc.TotalListPricePerHour += list
		doc.TotalEffectivePricePerHour += effective[nc]
	}
	var notReady []string
	for _, p := range problems {
		notReady = append(notReady, fmt.Sprintf("nodepool %q: %s", p.NodePool, p.Reason))
	}
	for _, u := range plan.Unschedulable {
		reason := u.Reason
		if len(notReady) > 0 {
			reason += "; not ready: " + strings.Join(notReady, "; ")
		}
		doc.UnschedulablePods = append(doc.UnschedulablePods, PodDoc{Pod: u.Pod.Namespace + "/" + u.Pod.Name, Reason: reason})
	}
	sort.Slice(doc.UnschedulablePods, func(i, j int) bool { return doc.UnschedulablePods[i].Pod < doc.UnschedulablePods[j].Pod })
	doc.TotalPricePerHour = round(plan.TotalPrice())
	doc.TotalListPricePerHour = round(doc.TotalListPricePerHour)
	doc.TotalEffectivePricePerHour = round(doc.TotalEffectivePricePerHour)
	return doc
}

func round(f float64) float64 { return float64(int64(f*1e5+0.5)) / 1e5 }

func printTable(w io.Writer, doc Document, problems []state.NodePoolProblem) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NODEPOOL\tTYPE\tCAPACITY\tZONE\tPODS\t$/H")
	pods := 0
	for _, nc := range doc.NodeClaims {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.4f\n", nc.NodePool, nc.InstanceType, nc.CapacityType, nc.Zone, nc.Pods, nc.PricePerHour)
		pods += nc.Pods
	}
	fmt.Fprintf(tw, "TOTAL\t%d nodeclaim(s)\t\t\t%d\t%.4f\n", len(doc.NodeClaims), pods, doc.TotalPricePerHour)
	tw.Flush()
	for _, p := range problems {
		fmt.Fprintf(w, "\nnodepool %q launches nothing: %s\n", p.NodePool, p.Reason)
	}
	for _, o := range doc.NodeOverlays {
		if o.Applied {
			fmt.Fprintf(w, "\nnodeoverlay %q applied\n", o.Name)
		} else {
			fmt.Fprintf(w, "\nnodeoverlay %q not applied (%s): %s\n", o.Name, o.Reason, o.Message)
		}
	}
	if len(doc.UnschedulablePods) > 0 {
		fmt.Fprintf(w, "\n%d pod(s) cannot be placed:\n", len(doc.UnschedulablePods))
		tw = tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
		fmt.Fprintln(tw, "POD\tREASON")
		for _, u := range doc.UnschedulablePods {
			fmt.Fprintf(tw, "%s\t%s\n", u.Pod, u.Reason)
		}
		tw.Flush()
	}
}

// planningFlags adds the controller's planning settings to cmd as flags.
func planningFlags(cmd *cobra.Command) map[string]*string {
	policies := map[string]*string{}
	for _, ps := range operator.PlanningSettings() {
		policies[ps.Flag] = cmd.Flags().String(ps.Flag, ps.Default, fmt.Sprintf("%s (env %s)", ps.Usage, ps.Env))
	}
	return policies
}

// planningSettings are the controller's planning settings from the flags
// planningFlags added, or their variables, so that an offline plan is the
// one the controller would make.
func planningSettings(cmd *cobra.Command, policies map[string]*string) (scheduling.Options, error) {
	var args []string
	for name, v := range policies {
		if cmd.Flags().Changed(name) {
			args = append(args, "--"+name+"="+*v)
		}
	}
	return operator.ParsePlanning(args, os.Getenv)
}
