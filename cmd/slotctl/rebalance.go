package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func init() { register(newRebalanceCmd) }

// `slotctl rebalance -o json` needs --yes (there is no one to ask) and
// prints the plan as it ended (planJSON).
type rebalanceOptions struct {
	plan planFlags
	yes  bool
}

func newRebalanceCmd(g *globals) *cobra.Command {
	var o rebalanceOptions
	cmd := &cobra.Command{
		Use:   "rebalance [--yes]",
		Short: "Plan, show, confirm, apply and follow a rebalance in one step",
		Long: `rebalance is plan + apply --wait with a question in between: it computes a
plan for the current nodes (plus any --add/--drain/--weight), shows it, asks
"apply? [y/N]" on the terminal and, on yes, applies it and follows it with a
progress bar. --yes skips the question. Exit codes as for apply --wait; a "no"
changes nothing and exits 1.`,
		Example: `  slotctl rebalance
  slotctl rebalance --add n4=127.0.0.1:7504 --yes
  slotctl nodes drain n3 && slotctl rebalance --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := o.plan.request(g.operator)
			if err != nil {
				return err
			}
			if g.output == "json" && !o.yes {
				return usagef("-o json cannot ask for confirmation; pass --yes")
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				p, rate, err := g.propose(ctx, c, req)
				if err != nil {
					return err
				}
				if g.output == "table" {
					if err := printPlanPreview(g.stdout, p, rate); err != nil {
						return err
					}
				}
				if len(p.GetMoves()) == 0 && p.GetEdits() == nil {
					return g.printPlan(p, func(w io.Writer) error {
						_, err := fmt.Fprintln(w, "\nnothing to move: the cluster is balanced")
						return err
					})
				}
				if !o.yes {
					ok, err := confirm(g.stdout, g.stdin, fmt.Sprintf("\napply plan %s (%d moves)? [y/N] ", p.GetId(), len(p.GetMoves())))
					if err != nil {
						return err
					}
					if !ok {
						return fmt.Errorf("not applied; nothing changed (plan %s stays proposed: slotctl apply %s)", p.GetId(), p.GetId())
					}
				}
				if g.output == "table" {
					fmt.Fprintln(g.stdout)
				}
				started, err := g.startPlan(ctx, c, p.GetId(), false)
				if err != nil {
					return err
				}
				return g.finishPlan(ctx, c, started, true)
			})
		},
	}
	o.plan.register(cmd.Flags())
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "apply without asking")
	return cmd
}

// confirm asks question on w and reads a y/N answer from r. Anything but
// y or yes is no; so is end of input.
func confirm(w io.Writer, r io.Reader, question string) (bool, error) {
	fmt.Fprint(w, question)
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read the answer: %w", err)
	}
	if errors.Is(err, io.EOF) && line == "" {
		fmt.Fprintln(w)
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}
