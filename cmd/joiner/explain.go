package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/explain"
	"github.com/spf13/cobra"
)

func newExplainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Say why Joiner does, or does not, disrupt a node",
		Long: `explain asks the running controller for the last word of its disruption
pass: the same decision code that acts, not a second model of it.`,
		SilenceUsage: true,
	}
	cmd.AddCommand(newExplainNodeCommand(), newExplainNodeClaimCommand(), newExplainPodCommand(), newExplainNodePoolCommand())
	return cmd
}

func newExplainPodCommand() *cobra.Command {
	var endpoint, output string
	cmd := &cobra.Command{
		Use:   "pod NAMESPACE/NAME",
		Short: "Why a pod is pending: what keeps each NodePool from running it",
		Long: `explain pod prints why the controller's last provisioning batch left the pod
pending: for each NodePool, the requirement, taint, limit or size that
keeps it from running the pod. It asks the controller's metrics port, as
explain node does.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if ns, name, ok := strings.Cut(args[0], "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				return fmt.Errorf("pod %q: give it as NAMESPACE/NAME, such as default/web-1", args[0])
			}
			var p explain.Pod
			if err := fetch(endpoint, explain.PodsPath+args[0], &p); err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd, p)
			}
			_, err := io.WriteString(cmd.OutOrStdout(), describePod(p))
			return err
		},
	}
	explainFlags(cmd, &endpoint, &output)
	return cmd
}

// describePod is why a pod is pending, as text: each NodePool's reason on
// a line of its own.
func describePod(p explain.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s: pending\n", p.Pod)
	if len(p.Pools) == 0 {
		fmt.Fprintf(&b, "  %s\n", p.Reason)
	}
	for _, r := range p.Pools {
		fmt.Fprintf(&b, "  nodepool %q: %s\n", r.NodePool, r.Reason)
	}
	fmt.Fprintf(&b, "  decided at %s\n", p.DecidedAt.UTC().Format(time.RFC3339))
	return b.String()
}

func newExplainNodeCommand() *cobra.Command {
	var endpoint, output string
	cmd := &cobra.Command{
		Use:   "node NAME",
		Short: "Why a node is, or is not, being consolidated, and the move if it is",
		Long: `explain node prints what the controller's last disruption pass decided about
the node: the move it makes (delete, or replace with which type, and what the
command saves), or why it stays: a PDB by name, do-not-disrupt on the node or
a pod, a budget, no cheaper type, pods that fit nowhere else, consolidateAfter
and when it passes, WhenEmpty, not initialized, nominated for pending pods.

The controller serves this on its metrics port (` + explain.Path + `NAME). From outside the
cluster, forward the port first:

  kubectl port-forward -n kube-system deploy/karpenter 8080:8080

(the Deployment is named for the Helm release, karpenter in the install guide).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var n explain.Node
			if err := fetch(endpoint, explain.Path+url.PathEscape(args[0]), &n); err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd, n)
			}
			_, err := io.WriteString(cmd.OutOrStdout(), describe(n))
			return err
		},
	}
	explainFlags(cmd, &endpoint, &output)
	return cmd
}

// explainFlags are every explain command's --endpoint and -o.
func explainFlags(cmd *cobra.Command, endpoint, output *string) {
	cmd.Flags().StringVar(endpoint, "endpoint", "http://localhost:8080", "the controller's metrics endpoint")
	cmd.Flags().StringVarP(output, "output", "o", "text", "text or json")
}

// checkOutput refuses an -o other than text or json.
func checkOutput(output string) error {
	if output != "text" && output != "json" {
		return fmt.Errorf("-o %q: give text or json", output)
	}
	return nil
}

// printJSON prints v indented.
func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fetch asks the controller at endpoint for path and decodes its answer
// into v; a 404's message (the board has nothing on it) is the error.
func fetch(endpoint, path string, v any) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("--endpoint %q is not a URL: give the controller's metrics endpoint, such as http://localhost:8080", endpoint)
	}
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(strings.TrimSuffix(endpoint, "/") + path)
	if err != nil {
		return fmt.Errorf("asking the controller at --endpoint %s: %w; is its metrics port forwarded there (kubectl port-forward -n kube-system deploy/karpenter 8080:8080)?", endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		var e struct{ Error string }
		if json.NewDecoder(resp.Body).Decode(&e) == nil && e.Error != "" {
			return fmt.Errorf("%s", e.Error)
		}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the controller at --endpoint %s answered %s; is it Joiner's metrics endpoint?", endpoint, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("the controller's answer: %w", err)
	}
	return nil
}

// describe is a verdict as text.
func describe(n explain.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s", n.Node)
	if n.NodeClaim != "" {
		fmt.Fprintf(&b, " (NodeClaim %s, NodePool %s)", n.NodeClaim, n.NodePool)
	}
	switch n.Verdict {
	case explain.Disrupting:
		fmt.Fprintf(&b, "\n  being disrupted (%s): %s, saving $%.4f/hour\n", n.Reason, n.Move, n.SavingPerHour)
	case explain.Movable:
		fmt.Fprintf(&b, "\n  can be disrupted (%s): %s, saving $%.4f/hour, after the command underway\n", n.Reason, n.Move, n.SavingPerHour)
	default:
		fmt.Fprintf(&b, "\n  kept: %s\n", n.Reason)
	}
	fmt.Fprintf(&b, "  decided at %s\n", n.DecidedAt.UTC().Format(time.RFC3339))
	return b.String()
}
