package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newResumeCmd) }

// `slotctl resume -o json` prints the plan (planJSON).
func newResumeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "resume [PLAN_ID]",
		Short:   "Continue a paused plan (refused if the cluster changed under it)",
		Example: "  slotctl resume\n  slotctl status",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.planVerb(cmd.Context(), args, "resume", func(ctx context.Context, c *conn, id string) (*slotdv1.Plan, error) {
				resp, err := c.admin.Resume(ctx, &slotdv1.ResumeRequest{PlanId: id, Operator: g.operator})
				return resp.GetPlan(), err
			}, "follow it with: slotctl apply %[1]s --wait")
		},
	}
}
