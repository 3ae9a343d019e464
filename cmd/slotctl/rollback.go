package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newRollbackCmd) }

// `slotctl rollback -o json` prints the reverse plan (planJSON).
type rollbackOptions struct {
	last   bool
	reason string
	wait   bool
	yes    bool
}

func newRollbackCmd(g *globals) *cobra.Command {
	var o rollbackOptions
	cmd := &cobra.Command{
		Use:   "rollback PLAN_ID|--last [--wait]",
		Short: "Undo a plan's committed moves, newest first, through the same throttled protocol",
		Long: `rollback creates and starts a plan that moves every slot the plan moved back to
where it came from, one at a time. --last picks the newest plan that ended
(done, cancelled or failed). slotd refuses (exit 3) a plan that is still
applying or paused (cancel it first) and a slot that changed owner since.
On a terminal it first asks for confirmation (--yes skips the question); a
"no" changes nothing and exits 1.`,
		Example: `  slotctl rollback --last --wait
  slotctl history --limit 5`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == o.last {
				return usagef("give either a PLAN_ID or --last")
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				id := ""
				if len(args) == 1 {
					id = args[0]
				} else {
					var err error
					if id, err = g.lastEndedPlan(ctx, c); err != nil {
						return err
					}
				}
				if !o.yes && g.canAsk() {
					if err := g.confirmRollback(ctx, c, id); err != nil {
						return err
					}
				}
				cctx, cancel := g.call(ctx)
				resp, err := c.admin.Rollback(cctx, &slotdv1.RollbackRequest{PlanId: id, Operator: g.operator, Reason: o.reason})
				cancel()
				if err != nil {
					return err
				}
				return g.finishPlan(ctx, c, resp.GetPlan(), o.wait)
			})
		},
	}
	cmd.Flags().BoolVar(&o.last, "last", false, "roll back the newest plan that ended")
	cmd.Flags().StringVar(&o.reason, "reason", "", "why, recorded with the reverse plan")
	cmd.Flags().BoolVar(&o.wait, "wait", false, "follow the reverse plan until it ends")
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "roll back without asking")
	return cmd
}

// lastEndedPlan returns the newest plan that ended and was not rolled back.
func (g *globals) lastEndedPlan(ctx context.Context, c *conn) (string, error) {
	cctx, cancel := g.call(ctx)
	defer cancel()
	resp, err := c.admin.ListPlans(cctx, &slotdv1.ListPlansRequest{})
	if err != nil {
		return "", err
	}
	for _, p := range slices.Backward(resp.GetPlans()) {
		switch p.GetState() {
		case slotdv1.PlanState_PLAN_STATE_APPLYING, slotdv1.PlanState_PLAN_STATE_PAUSED:
			return "", refusedError{fmt.Errorf("plan %s is %s; cancel it first (slotctl cancel), then roll back", p.GetId(), planState(p.GetState()))}
		case slotdv1.PlanState_PLAN_STATE_DONE, slotdv1.PlanState_PLAN_STATE_CANCELLED, slotdv1.PlanState_PLAN_STATE_FAILED:
			return p.GetId(), nil
		}
	}
	return "", refusedError{fmt.Errorf("no plan has ended that could be rolled back (see slotctl history)")}
}

// confirmRollback says what a rollback of plan id will reverse and asks.
func (g *globals) confirmRollback(ctx context.Context, c *conn, id string) error {
	cctx, cancel := g.call(ctx)
	resp, err := c.admin.GetPlan(cctx, &slotdv1.GetPlanRequest{PlanId: id})
	cancel()
	if err != nil {
		return err
	}
	p := resp.GetPlan()
	q := fmt.Sprintf("roll back plan %s (%s, %d moves committed): move those slots back to their sources? [y/N] ",
		id, planState(p.GetState()), p.GetProgress().GetDone())
	// With -o json stdout holds the plan alone: the question goes to stderr.
	ask := g.stdout
	if g.output == "json" {
		ask = g.stderr
	}
	ok, err := confirm(ctx, ask, g.stdin, q)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("not rolled back; nothing changed")
	}
	return nil
}
