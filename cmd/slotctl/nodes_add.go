package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { registerNodes(newNodesAddCmd) }

// `slotctl nodes add -o json` prints nodeChangeJSON.
func newNodesAddCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "add ID=ADDR[,zone=Z][,weight=W]",
		Short: "Register a node ahead of its store (it gets slots only from a plan)",
		Long: `add registers a node in the directory. It owns no slot until a plan fills it
(slotctl rebalance, or slotctl plan and apply). A store node normally registers
itself when it starts and then keeps its registration alive with heartbeats; a
node added here that never heartbeats is marked down after a while. To add a
node and fill it in one reviewed step, use slotctl plan --add instead.

add never re-points a node: it refuses (exit 3, nothing changes) an id that
is registered at another address and an address another node has, saying
what each node owns. Change an address with slotctl nodes set-addr. Adding a
node exactly as it is registered changes nothing.`,
		Example: `  slotctl nodes add n4=127.0.0.1:7504
  slotctl nodes add n4=127.0.0.1:7504,zone=b,weight=2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseNodeSpec(args[0])
			if err != nil {
				return err
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.op.AddNode(cctx, &slotdv1.AddNodeRequest{
					Node:     &slotdv1.Node{Id: n.Id, Address: n.Address, Zone: n.Zone, Weight: n.Weight},
					Operator: g.operator,
				})
				if err != nil {
					return err
				}
				if !resp.GetAdded() {
					return g.printNodeChange("already registered:", resp.GetNode(), resp.GetVersion(), "nothing changed")
				}
				return g.printNodeChange("registered", resp.GetNode(), resp.GetVersion(),
					"it owns no slots yet; fill it with: slotctl rebalance")
			})
		},
	}
}
