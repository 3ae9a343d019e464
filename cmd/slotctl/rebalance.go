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
progress bar. --yes skips the question; without a terminal to ask on (a script,
a pipe) rebalance needs --yes and otherwise exits 2 before contacting slotd.
Exit codes as for apply --wait; a "no" changes nothing and exits 1.`,
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
			if !o.yes && !g.canAsk() {
				return usagef("no terminal to ask for confirmation on; pass --yes to apply without asking")
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
						msg := "nothing to move: the cluster is balanced"
						if strings.HasSuffix(p.GetNote(), "nothing to do") {
							msg = p.GetNote()
						}
						_, err := fmt.Fprintln(w, "\n"+msg)
						return err
					})
				}
				if !o.yes {
					ok, err := confirm(ctx, g.stdout, g.stdin, fmt.Sprintf("\napply plan %s (%d moves)? [y/N] ", p.GetId(), len(p.GetMoves())))
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
// y or yes is no; so are end of input and Ctrl-C (ctx done), which a
// blocked read would otherwise ignore.
func confirm(ctx context.Context, w io.Writer, r io.Reader, question string) (bool, error) {
	fmt.Fprint(w, question)
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	// The read cannot be interrupted; on Ctrl-C the process exits and
	// takes the goroutine with it.
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		got <- answer{line, err}
	}()
	var a answer
	select {
	case <-ctx.Done():
		fmt.Fprintln(w)
		return false, nil
	case a = <-got:
	}
	if a.err != nil && !errors.Is(a.err, io.EOF) {
		return false, fmt.Errorf("read the answer: %w", a.err)
	}
	if errors.Is(a.err, io.EOF) && a.line == "" {
		fmt.Fprintln(w)
	}
	reply := strings.ToLower(strings.TrimSpace(a.line))
	return reply == "y" || reply == "yes", nil
}
