package main

import (
	"context"
	"net"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { registerNodes(newNodesSetAddrCmd) }

// `slotctl nodes set-addr -o json` prints nodeChangeJSON.
func newNodesSetAddrCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "set-addr ID HOST:PORT",
		Short: "Change where a node serves; recorded in the audit log",
		Long: `set-addr changes the address of a registered node: clients and the mover reach
the node's slots there from the next map version on. It is its own command
(slotctl nodes add refuses to re-point a node) because a wrong address makes
every key of the node fail. The change is recorded in the audit log with who
and --reason (slotctl history --kind node).`,
		Example: `  slotctl nodes set-addr n2 10.0.0.12:7502 --reason "moved to a new host"`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkNodeID(args[0]); err != nil {
				return err
			}
			if _, port, err := net.SplitHostPort(args[1]); err != nil || port == "" {
				return usagef("address %q is not host:port, e.g. 10.0.0.12:7502", args[1])
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.admin.UpdateAddr(cctx, &slotdv1.UpdateAddrRequest{NodeId: args[0], Address: args[1], Operator: g.operator})
				if err != nil {
					return err
				}
				return g.printNodeChange("re-addressed", resp.GetNode(), resp.GetVersion(), "")
			})
		},
	}
}
