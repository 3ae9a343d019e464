package main

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newMoveCmd) }

// `slotctl move -o json` prints the one-move plan (planJSON).
type moveOptions struct {
	to     string
	reason string
	wait   bool
}

func newMoveCmd(g *globals) *cobra.Command {
	var o moveOptions
	cmd := &cobra.Command{
		Use:   "move SLOT --to ID",
		Short: "Move one slot to a node now (a plan of one move)",
		Example: `  slotctl lookup --slot 42
  slotctl move 42 --to n4 --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := parseSlot(args[0])
			if err != nil {
				return err
			}
			if o.to == "" {
				return usagef("say where to: --to NODE_ID")
			}
			if err := checkNodeID(o.to); err != nil {
				return err
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				resp, err := c.admin.Move(cctx, &slotdv1.MoveRequest{Slot: s, To: o.to, Operator: g.operator, Reason: o.reason})
				cancel()
				if err != nil {
					return err
				}
				return g.finishPlan(ctx, c, resp.GetPlan(), o.wait)
			})
		},
	}
	cmd.Flags().StringVar(&o.to, "to", "", "the node that gets the slot")
	cmd.Flags().StringVar(&o.reason, "reason", "", "why, recorded in history")
	cmd.Flags().BoolVar(&o.wait, "wait", false, "follow the move until it ends")
	return cmd
}

// parseSlot reads a slot number, 0-16383.
func parseSlot(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n > 16383 {
		return 0, usagef("slot %q is not a number from 0 to 16383", s)
	}
	return uint32(n), nil
}
