package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() {
	registerNodes(newNodesDrainCmd)
	registerNodes(newNodesUndrainCmd)
}

// `slotctl nodes drain -o json` prints nodeChangeJSON.
func newNodesDrainCmd(g *globals) *cobra.Command {
	cmd := nodeStateCmd(g, "draining", "nothing moved yet; move its slots away with: slotctl rebalance",
		func(ctx context.Context, c *conn, id string) (*slotdv1.Node, uint64, error) {
			resp, err := c.admin.DrainNode(ctx, &slotdv1.DrainNodeRequest{NodeId: id, Operator: g.operator})
			return resp.GetNode(), resp.GetVersion(), err
		})
	cmd.Use = "drain ID"
	cmd.Short = "Mark a node draining: it keeps serving, and the next plan moves all its slots away"
	cmd.Example = `  slotctl nodes drain n3
  slotctl rebalance`
	return cmd
}

// `slotctl nodes undrain -o json` prints nodeChangeJSON.
func newNodesUndrainCmd(g *globals) *cobra.Command {
	cmd := nodeStateCmd(g, "undrained", "nothing moved; see the effect with: slotctl plan",
		func(ctx context.Context, c *conn, id string) (*slotdv1.Node, uint64, error) {
			resp, err := c.admin.UndrainNode(ctx, &slotdv1.UndrainNodeRequest{NodeId: id, Operator: g.operator})
			return resp.GetNode(), resp.GetVersion(), err
		})
	cmd.Use = "undrain ID"
	cmd.Short = "Take a drain back: the node is active again and later plans give it slots"
	cmd.Long = `Take a drain back: the node is active again and later plans give it slots.
Slots it already gave away stay where they are (rebalance to even them out).
A plan that is moving its slots away keeps going: cancel it first.`
	cmd.Example = `  slotctl nodes undrain n3
  slotctl plan`
	return cmd
}

// nodeStateCmd is `slotctl nodes VERB ID` for a verb that changes one
// node's state with call and prints the node as it is after (what), and
// what to do next.
func nodeStateCmd(g *globals, what, next string, call func(ctx context.Context, c *conn, id string) (*slotdv1.Node, uint64, error)) *cobra.Command {
	return &cobra.Command{
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkNodeID(args[0]); err != nil {
				return err
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				n, v, err := call(cctx, c, args[0])
				if err != nil {
					return err
				}
				return g.printNodeChange(what, n, v, next)
			})
		},
	}
}
