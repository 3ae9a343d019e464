package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newPlansCmd) }

func newPlansCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plans",
		Short: "List the kept plans, finished ones too, or show one with its moves",
		Example: `  slotctl plans list
  slotctl plans show p-12-3f9a1c0b2d4e`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("say what to do: slotctl plans list|show ID (see slotctl plans --help)")
		},
	}
	cmd.AddCommand(newPlansListCmd(g), newPlansShowCmd(g))
	return cmd
}

// plansListJSON is `slotctl plans list -o json`: every kept plan, newest
// first, each in the plan form (planJSON) without its moves.
//
//	{"plans": [<plan>, ...]}
type plansListJSON struct {
	Plans []json.RawMessage `json:"plans"`
}

func newPlansListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Every kept plan, newest first: state, moves done/skipped/failed, bytes, who, why, when, how long",
		Long: `plans list shows every plan slotd keeps, finished ones included: its state,
how many moves committed, were skipped (the slot was already there) and
failed (a resume tries them again), the bytes the transfers copied beside the
planner's estimate (~), who applied it and why, when it was planned and how
long it has run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.admin.ListPlans(cctx, &slotdv1.ListPlansRequest{})
				if err != nil {
					return err
				}
				plans := slices.Clone(resp.GetPlans())
				slices.Reverse(plans) // the server lists oldest first
				out := plansListJSON{Plans: []json.RawMessage{}}
				for _, p := range plans {
					raw, err := planJSON(p)
					if err != nil {
						return err
					}
					out.Plans = append(out.Plans, raw)
				}
				return g.print(out, func(w io.Writer) error {
					if len(plans) == 0 {
						_, err := fmt.Fprintln(w, "no plans kept (make one with: slotctl plan)")
						return err
					}
					t := newTable(w, "PLAN", "STATE", "MOVES", "DONE", "SKIPPED", "FAILED", "COPIED", "ESTIMATED", "OPERATOR", "PLANNED", "TOOK", "REASON")
					for _, p := range plans {
						pr := p.GetProgress()
						t.row(p.GetId(), planState(p.GetState()), pr.GetMoves(), pr.GetDone(), pr.GetSkipped(), planFailed(p),
							planCopied(p), "~"+formatBytes(p.GetTotalBytes()), orDash(p.GetOperator()), formatTime(p.GetCreatedAt()),
							planTook(p), orDash(p.GetReason()))
					}
					return t.flush()
				})
			})
		},
	}
}

func newPlansShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show PLAN_ID",
		Short: "One plan with its moves: state, outcome of each move, bytes, who, why, when",
		Long: `plans show prints one kept plan: its state and counts as in plans list, its
node edits and every move with its outcome. -o json prints the plan form
(see docs/slotctl-json.md), which is also a plan file.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.admin.GetPlan(cctx, &slotdv1.GetPlanRequest{PlanId: args[0]})
				if err != nil {
					return err
				}
				p := resp.GetPlan()
				return g.printPlan(p, func(w io.Writer) error { return printPlanDetail(w, p) })
			})
		},
	}
}

// printPlanDetail is the table form of plans show.
func printPlanDetail(w io.Writer, p *slotdv1.Plan) error {
	pr := p.GetProgress()
	fmt.Fprintf(w, "plan %s %s (base version %d)\n", p.GetId(), planState(p.GetState()), p.GetBaseVersion())
	fmt.Fprintf(w, "moves: %d, done %d, skipped %d, failed %d, aborted %d, pending %d\n", pr.GetMoves(), pr.GetDone(), pr.GetSkipped(),
		planFailed(p), pr.GetAborted(), pr.GetPending())
	fmt.Fprintf(w, "bytes: %s copied, ~%s estimated\n", planCopied(p), formatBytes(p.GetTotalBytes()))
	fmt.Fprintf(w, "operator: %s; reason: %s\n", orDash(p.GetOperator()), orDash(p.GetReason()))
	fmt.Fprintf(w, "planned %s, updated %s, took %s\n", formatTime(p.GetCreatedAt()), formatTime(p.GetUpdatedAt()), planTook(p))
	if id := p.GetRollbackOf(); id != "" {
		fmt.Fprintf(w, "rolls back plan %s\n", id)
	}
	if id := p.GetRolledBackBy(); id != "" {
		fmt.Fprintf(w, "rolled back by plan %s\n", id)
	}
	if e := p.GetError(); e != "" {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	if e := p.GetEdits(); e != nil {
		for _, n := range e.GetAdd() {
			fmt.Fprintf(w, "adds node %s at %s\n", n.GetId(), n.GetAddress())
		}
		for _, id := range e.GetDrain() {
			fmt.Fprintf(w, "drains node %s\n", id)
		}
		for _, id := range sortedKeys(e.GetWeights()) {
			fmt.Fprintf(w, "sets the weight of %s to %d\n", id, e.GetWeights()[id])
		}
	}
	if len(p.GetMoves()) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "SLOT", "FROM", "TO", "OUTCOME", "COPIED", "ESTIMATED", "STARTED", "FINISHED", "REASON")
	for _, m := range p.GetMoves() {
		outcome := movePhase(m.GetPhase())
		switch {
		case m.GetSkipped():
			outcome = "skipped"
		case m.GetFailed():
			outcome = "failed"
		}
		if e := m.GetError(); e != "" {
			outcome += ": " + e
		}
		copied := "-"
		if m.GetBytesCopied() > 0 {
			copied = formatBytes(m.GetBytesCopied())
		}
		t.row(m.GetSlot(), m.GetFrom(), m.GetTo(), outcome, copied, "~"+formatBytes(m.GetBytes()),
			formatTime(m.GetStartedAt()), formatTime(m.GetFinishedAt()), orDash(m.GetReason()))
	}
	return t.flush()
}

// planFailed counts the plan's moves that failed (a resume tries them
// again).
func planFailed(p *slotdv1.Plan) uint32 { return p.GetProgress().GetFailed() }

// planCopied is the bytes the plan's done moves' transfers copied, as
// measured; "-" when none did.
func planCopied(p *slotdv1.Plan) string {
	n := p.GetProgress().GetBytesCopied()
	if n == 0 {
		return "-"
	}
	return formatBytes(n)
}

// planTook is how long a plan has run: from planned to its last change.
func planTook(p *slotdv1.Plan) string {
	if p.GetCreatedAt() == nil || p.GetUpdatedAt() == nil || p.GetState() == slotdv1.PlanState_PLAN_STATE_PROPOSED {
		return "-"
	}
	return formatDuration(p.GetUpdatedAt().AsTime().Sub(p.GetCreatedAt().AsTime()))
}

// planBytesDone says how many bytes a plan moved: what its transfers
// copied when slotd reports it, else the planner's estimate, labelled.
func planBytesDone(p *slotdv1.Plan) string {
	if c := planCopied(p); c != "-" {
		return c + " copied"
	}
	return "~" + formatBytes(p.GetProgress().GetBytesDone()) + " (estimated)"
}
