package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { registerNodes(newNodesDrainCmd) }

// `slotctl nodes drain -o json` prints nodeChangeJSON.
func newNodesDrainCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "drain ID",
		Short: "Mark a node draining: it keeps serving, and the next plan moves all its slots away",
		Example: `  slotctl nodes drain n3
  slotctl rebalance`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkNodeID(args[0]); err != nil {
				return err
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.admin.DrainNode(cctx, &slotdv1.DrainNodeRequest{NodeId: args[0], Operator: g.operator})
				if err != nil {
					return err
				}
				return g.printNodeChange("draining", resp.GetNode(), resp.GetVersion(),
					"nothing moved yet; move its slots away with: slotctl rebalance")
			})
		},
	}
}
