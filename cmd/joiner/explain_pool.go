package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/explain"
	"github.com/spf13/cobra"
)

// board is the whole of the controller's last disruption pass.
type board struct {
	DecidedAt time.Time      `json:"decidedAt"`
	Nodes     []explain.Node `json:"nodes"`
}

func newExplainNodeClaimCommand() *cobra.Command {
	var endpoint, output string
	cmd := &cobra.Command{
		Use:   "nodeclaim NAME",
		Short: "explain node, for the node of a NodeClaim",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var b board
			if err := fetch(endpoint, explain.Path, &b); err != nil {
				return err
			}
			for _, n := range b.Nodes {
				if n.NodeClaim == args[0] {
					if output == "json" {
						return printJSON(cmd, n)
					}
					_, err := io.WriteString(cmd.OutOrStdout(), describe(n))
					return err
				}
			}
			return fmt.Errorf("the last disruption pass saw no node of NodeClaim %s: it has no initialized node yet, or no pass has run since the controller started (kubectl get nodeclaim %s shows its state)", args[0], args[0])
		},
	}
	explainFlags(cmd, &endpoint, &output)
	return cmd
}

func newExplainNodePoolCommand() *cobra.Command {
	var endpoint, output string
	cmd := &cobra.Command{
		Use:   "nodepool NAME",
		Short: "What the next disruption of a NodePool's nodes is, and why each other node stays",
		Long: `explain nodepool prints, from the controller's last disruption pass, the move
it makes among the NodePool's nodes, or would make once the command under way
ends (the next disruption), and for every other node why it stays.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var b board
			if err := fetch(endpoint, explain.Path, &b); err != nil {
				return err
			}
			var mine []explain.Node
			for _, n := range b.Nodes {
				if n.NodePool == args[0] {
					mine = append(mine, n)
				}
			}
			if len(mine) == 0 {
				return fmt.Errorf("the last disruption pass saw no node of NodePool %s: it has no initialized nodes, or no pass has run since the controller started", args[0])
			}
			if output == "json" {
				return printJSON(cmd, board{DecidedAt: b.DecidedAt, Nodes: mine})
			}
			_, err := io.WriteString(cmd.OutOrStdout(), describePool(args[0], b.DecidedAt, mine))
			return err
		},
	}
	explainFlags(cmd, &endpoint, &output)
	return cmd
}

// describePool is a NodePool's nodes as text: the next disruption first,
// then each node kept with its reason.
func describePool(name string, at time.Time, nodes []explain.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "nodepool %s: %d node(s) in the last disruption pass (%s)\n", name, len(nodes), at.UTC().Format(time.RFC3339))
	next := false
	for _, verdict := range []string{explain.Disrupting, explain.Movable} {
		for _, n := range nodes {
			if n.Verdict != verdict {
				continue
			}
			when := "now"
			if verdict == explain.Movable {
				when = "after the command under way"
			}
			fmt.Fprintf(&b, "  next disruption (%s, %s): node %s, %s, saving $%.4f/hour\n", n.Reason, when, n.Node, n.Move, n.SavingPerHour)
			next = true
		}
	}
	if !next {
		b.WriteString("  next disruption: none; every node stays\n")
	}
	for _, n := range nodes {
		if n.Verdict == explain.Kept {
			fmt.Fprintf(&b, "  node %s kept: %s\n", n.Node, n.Reason)
		}
	}
	return b.String()
}
