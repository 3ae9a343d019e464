package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { registerNodes(newNodesRemoveCmd) }

// nodeRemovedJSON is `slotctl nodes remove -o json`:
//
//	{"version": 14, "removed": "n3"}
type nodeRemovedJSON struct {
	Version uint64 `json:"version"`
	Removed string `json:"removed"`
}

func newNodesRemoveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID",
		Short: "Delete a node that owns no slot (drain it and rebalance first)",
		Example: `  slotctl nodes drain n3 && slotctl rebalance --yes
  slotctl nodes remove n3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkNodeID(args[0]); err != nil {
				return err
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.admin.RemoveNode(cctx, &slotdv1.RemoveNodeRequest{NodeId: args[0], Operator: g.operator})
				if err != nil {
					return err
				}
				out := nodeRemovedJSON{Version: resp.GetVersion(), Removed: args[0]}
				return g.print(out, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "removed node %s at version %d\n", out.Removed, out.Version)
					return err
				})
			})
		},
	}
}
