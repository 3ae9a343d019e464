package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newCancelCmd) }

// `slotctl cancel -o json` prints the plan (planJSON).
func newCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel [PLAN_ID]",
		Short: "End a plan: abort the move in flight, run no more; committed moves stay",
		Example: `  slotctl cancel
  slotctl rollback --last --wait`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.planVerb(cmd.Context(), args, "cancel", func(ctx context.Context, c *conn, id string) (*slotdv1.Plan, error) {
				resp, err := c.admin.Cancel(ctx, &slotdv1.CancelRequest{PlanId: id, Operator: g.operator})
				return resp.GetPlan(), err
			}, "committed moves stay; undo them with: slotctl rollback %[1]s")
		},
	}
}
