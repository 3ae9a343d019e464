package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newApplyCmd) }

// `slotctl apply -o json` prints the plan (planJSON): as started, or with
// --wait as it ended.
type applyOptions struct {
	wait bool
}

func newApplyCmd(g *globals) *cobra.Command {
	var o applyOptions
	cmd := &cobra.Command{
		Use:   "apply PLAN_ID|plan.json|- [--wait]",
		Short: "Start a proposed plan, by id or from a plan file, and optionally wait for it",
		Long: `apply starts a plan: one stored by slotctl plan (give its id), or a plan file
written by slotctl plan -o json (give its path, or - for stdin), which is first
submitted to slotd. slotd refuses (exit 3) a plan whose base no longer holds
because the cluster changed since it was computed: plan again.

With --wait, apply follows the plan until it ends, with a progress bar on a
terminal and a line per 5% elsewhere. It exits 0 when the plan is done, 1 when
it failed or paused on a failure, 3 when someone else cancelled or rolled it
back. Ctrl-C stops waiting, not the plan (exit 1); stop the plan with
slotctl cancel. apply --wait on a plan already applying just follows it.`,
		Example: `  slotctl plan --add n4=127.0.0.1:7504 -o json > plan.json
  slotctl apply plan.json --wait
  slotctl plan --drain n3 -o json | slotctl apply - --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file, err := readPlanArg(args[0], g.stdin)
			if err != nil {
				return err
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				id := args[0]
				if file != nil {
					cctx, cancel := g.call(ctx)
					resp, err := c.admin.SubmitPlan(cctx, &slotdv1.SubmitPlanRequest{Plan: file, Operator: g.operator})
					cancel()
					if err != nil {
						return err
					}
					id = resp.GetPlan().GetId()
				}
				p, err := g.startPlan(ctx, c, id, o.wait)
				if err != nil {
					return err
				}
				return g.finishPlan(ctx, c, p, o.wait)
			})
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "follow the plan until it ends, showing progress")
	return cmd
}

// readPlanArg reads a plan file when arg names one ("-" is stdin); nil
// when arg is a plan id. Ids are hex digits with dashes, so anything with
// a dot or a slash, or an existing file, is a path.
func readPlanArg(arg string, stdin io.Reader) (*slotdv1.Plan, error) {
	var data []byte
	var err error
	switch {
	case arg == "-":
		data, err = io.ReadAll(stdin)
	case strings.ContainsAny(arg, "./\\"):
		data, err = os.ReadFile(arg)
	default:
		if data, err = os.ReadFile(arg); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, usagef("read plan file: %v", err)
	}
	var p slotdv1.Plan
	if err := protojson.Unmarshal(data, &p); err != nil {
		return nil, usagef("%s is not a plan file (write one with slotctl plan -o json > plan.json): %v", arg, err)
	}
	if p.GetId() == "" {
		return nil, usagef("%s is not a plan file: it has no plan id", arg)
	}
	return &p, nil
}

// startPlan applies plan id. With wait, a plan that already runs is
// followed instead of refused.
func (g *globals) startPlan(ctx context.Context, c *conn, id string, wait bool) (*slotdv1.Plan, error) {
	cctx, cancel := g.call(ctx)
	defer cancel()
	if wait {
		cur, err := c.admin.GetPlan(cctx, &slotdv1.GetPlanRequest{PlanId: id})
		if err != nil {
			return nil, err
		}
		switch cur.GetPlan().GetState() {
		case slotdv1.PlanState_PLAN_STATE_APPLYING, slotdv1.PlanState_PLAN_STATE_PAUSED:
			if g.output == "table" {
				fmt.Fprintf(g.stdout, "plan %s is already %s; following it\n", id, planState(cur.GetPlan().GetState()))
			}
			return cur.GetPlan(), nil
		}
	}
	resp, err := c.admin.Apply(cctx, &slotdv1.ApplyRequest{PlanId: id, Operator: g.operator})
	if err != nil {
		return nil, err
	}
	return resp.GetPlan(), nil
}

// finishPlan reports a started plan and, with wait, follows it to its end.
// Progress goes to stdout in table form only: -o json prints the final plan.
func (g *globals) finishPlan(ctx context.Context, c *conn, p *slotdv1.Plan, wait bool) error {
	if g.output == "table" {
		fmt.Fprintf(g.stdout, "plan %s %s: %d moves, ~%s, about %s (estimated)\n", p.GetId(), planState(p.GetState()),
			len(p.GetMoves()), formatBytes(p.GetTotalBytes()), formatDuration(p.GetEstimated().AsDuration()))
	}
	if !wait {
		return g.printPlan(p, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "follow it with: slotctl apply %s --wait (or slotctl status)\n", p.GetId())
			return err
		})
	}
	var progressTo io.Writer
	if g.output == "table" {
		progressTo = g.stdout
	}
	end, err := g.waitPlan(ctx, c, p.GetId(), progressTo)
	if err != nil {
		if end != nil && g.output == "json" {
			_ = g.printPlan(end, nil)
		}
		return err
	}
	return g.printPlan(end, func(w io.Writer) error {
		pr := end.GetProgress()
		took := "-"
		if end.GetCreatedAt() != nil && end.GetUpdatedAt() != nil {
			took = formatDuration(end.GetUpdatedAt().AsTime().Sub(end.GetCreatedAt().AsTime()))
		}
		failed := ""
		if pr.GetFailed() > 0 {
			failed = fmt.Sprintf(", %d failed", pr.GetFailed())
		}
		_, err := fmt.Fprintf(w, "plan %s done: %d moves (%d skipped%s), %s, %s since it was planned\n",
			end.GetId(), pr.GetDone()+pr.GetSkipped(), pr.GetSkipped(), failed, planBytesDone(end), took)
		return err
	})
}
