package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { registerNodes(newNodesWeightCmd) }

// `slotctl nodes weight -o json` prints nodeChangeJSON.
func newNodesWeightCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "weight ID W",
		Short: "Set a node's relative share of the slots (0: the next plan empties it)",
		Example: `  slotctl nodes weight n1 2
  slotctl plan`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkNodeID(args[0]); err != nil {
				return err
			}
			w, err := parseWeight(args[1])
			if err != nil {
				return err
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.admin.SetWeight(cctx, &slotdv1.SetWeightRequest{NodeId: args[0], Weight: w, Operator: g.operator})
				if err != nil {
					return err
				}
				return g.printNodeChange("reweighted", resp.GetNode(), resp.GetVersion(),
					"nothing moved yet; see what would with: slotctl plan")
			})
		},
	}
}
