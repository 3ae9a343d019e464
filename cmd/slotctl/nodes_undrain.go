package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { registerNodes(newNodesUndrainCmd) }

// `slotctl nodes undrain -o json` prints nodeChangeJSON.
func newNodesUndrainCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "undrain ID",
		Short: "Take a drain back: the node is active again and later plans give it slots",
		Long: `Take a drain back: the node is active again and later plans give it slots.
Slots it already gave away stay where they are (rebalance to even them out).
A plan that is moving its slots away keeps going: cancel it first.`,
		Example: `  slotctl nodes undrain n3
  slotctl plan`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkNodeID(args[0]); err != nil {
				return err
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.admin.UndrainNode(cctx, &slotdv1.UndrainNodeRequest{NodeId: args[0], Operator: g.operator})
				if err != nil {
					return err
				}
				return g.printNodeChange("undrained", resp.GetNode(), resp.GetVersion(),
					"nothing moved; see the effect with: slotctl plan")
			})
		},
	}
}
