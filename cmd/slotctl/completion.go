package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

// Dynamic shell completion (cobra's `slotctl completion bash|zsh|fish`):
// node ids and plan ids come from slotd, with the connection settings of the
// command line being completed (its --context, --endpoints, TLS flags), and
// -o values and context names from slotctl itself. A slotd that does not
// answer within completionTimeout completes nothing rather than hang the
// shell.

const completionTimeout = 2 * time.Second

// addCompletions attaches the completion functions to the commands that
// take node or plan ids; it runs once the command tree is built, so the
// commands' own files stay as they are.
func addCompletions(root *cobra.Command, g *globals) {
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("context", completeContexts)
	nodeArg := func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.completeNodes(cmd)
	}
	planArg := func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.completePlans(cmd)
	}
	nodeFlag := func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return g.completeNodes(cmd)
	}
	for path, fn := range map[string]cobra.CompletionFunc{
		"nodes drain": nodeArg, "nodes undrain": nodeArg, "nodes remove": nodeArg, "nodes weight": nodeArg,
		"cancel": planArg, "pause": planArg, "resume": planArg, "rollback": planArg, "plans show": planArg,
		// apply takes a plan id or a file: ids first, files when none match.
		"apply": func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveDefault
			}
			ids, _ := g.completePlans(cmd)
			return ids, cobra.ShellCompDirectiveDefault
		},
	} {
		if c := findCommand(root, path); c != nil && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = fn
		}
	}
	for path, flag := range map[string]string{"map": "node", "history": "node", "watch": "node", "move": "to", "plan": "drain"} {
		if c := findCommand(root, path); c != nil && c.Flags().Lookup(flag) != nil {
			_ = c.RegisterFlagCompletionFunc(flag, nodeFlag)
		}
	}
}

// findCommand returns the command at path ("nodes drain"), or nil.
func findCommand(root *cobra.Command, path string) *cobra.Command {
	c, rest, err := root.Find(strings.Fields(path))
	if err != nil || len(rest) > 0 || c == root {
		return nil
	}
	return c
}

// completionConn dials slotd for a completion. cobra runs no
// PersistentPreRun for __complete, so the context is applied here.
func (g *globals) completionConn(cmd *cobra.Command, fn func(ctx context.Context, c *conn) error) error {
	if err := g.applyContext(cmd); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	return g.withConn(ctx, fn)
}

func (g *globals) completeNodes(cmd *cobra.Command) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	_ = g.completionConn(cmd, func(ctx context.Context, c *conn) error {
		r, err := c.dir.GetMap(ctx, &slotdv1.GetMapRequest{})
		if err != nil {
			return err
		}
		for _, n := range r.GetMap().GetNodes() {
			out = append(out, cobra.CompletionWithDesc(n.GetId(), n.GetAddress()))
		}
		return nil
	})
	return out, cobra.ShellCompDirectiveNoFileComp
}

func (g *globals) completePlans(cmd *cobra.Command) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	_ = g.completionConn(cmd, func(ctx context.Context, c *conn) error {
		r, err := c.admin.ListPlans(ctx, &slotdv1.ListPlansRequest{})
		if err != nil {
			return err
		}
		// Newest first: the plan just made is the likely one.
		ps := r.GetPlans()
		for i := len(ps) - 1; i >= 0; i-- {
			out = append(out, cobra.CompletionWithDesc(ps[i].GetId(), strings.ToLower(strings.TrimPrefix(ps[i].GetState().String(), "PLAN_STATE_"))))
		}
		return nil
	})
	return out, cobra.ShellCompDirectiveNoFileComp
}

func completeContexts(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	cfg, _, err := loadConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return cfg.names(), cobra.ShellCompDirectiveNoFileComp
}
