package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newPauseCmd) }

// `slotctl pause -o json` prints the plan (planJSON).
type pauseOptions struct{ abortCurrent bool }

func newPauseCmd(g *globals) *cobra.Command {
	var o pauseOptions
	cmd := &cobra.Command{
		Use:   "pause [PLAN_ID] [--abort-current]",
		Short: "Stop starting new moves of the applying plan; the move in flight finishes (or aborts)",
		Example: `  slotctl pause
  slotctl pause --abort-current`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.planVerb(cmd.Context(), args, "pause", func(ctx context.Context, c *conn, id string) (*slotdv1.Plan, error) {
				resp, err := c.admin.Pause(ctx, &slotdv1.PauseRequest{PlanId: id, AbortCurrent: o.abortCurrent, Operator: g.operator})
				return resp.GetPlan(), err
			}, "resume it with: slotctl resume %[1]s; stop it with: slotctl cancel %[1]s")
		},
	}
	cmd.Flags().BoolVar(&o.abortCurrent, "abort-current", false, "abort the move in flight too (its source keeps the slot)")
	return cmd
}

// planVerb runs a call on a plan, the given one or the active one, and
// prints the plan with a hint (a format with the plan id as %[1]s).
func (g *globals) planVerb(ctx context.Context, args []string, verb string,
	call func(ctx context.Context, c *conn, id string) (*slotdv1.Plan, error), hint string) error {
	return g.withConn(ctx, func(ctx context.Context, c *conn) error {
		var id string
		if len(args) > 0 {
			id = args[0]
		} else {
			var err error
			if id, err = g.activePlanID(ctx, c, verb); err != nil {
				return err
			}
		}
		cctx, cancel := g.call(ctx)
		defer cancel()
		p, err := call(cctx, c, id)
		if err != nil {
			return err
		}
		return g.printPlan(p, func(w io.Writer) error {
			fmt.Fprintln(w, planProgressLine(p))
			if hint != "" {
				fmt.Fprintf(w, hint+"\n", p.GetId())
			}
			return nil
		})
	})
}
