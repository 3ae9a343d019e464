package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newHistoryCmd) }

// historyJSON is `slotctl history -o json`: the newest --limit matching
// entries, newest first (--reverse: the same entries oldest first).
//
//	{"entries": [{"version": 9, "time": "2026-01-02T03:04:05.123Z", "category": "move",
//	              "action": "move-commit", "kind": "slot_moved",
//	              "slot": 17, "from": "n1", "to": "n4", "node_id": "", "move_id": "...",
//	              "plan_id": "...", "operator": "alice", "reason": "...", "detail": ""}]}
//
// category is move (per-move history), plan (apply, pause, resume, cancel,
// rollback, move), node (register, add, address, weight, drain, undrain,
// remove, down, up) or cluster (bootstrap, throttle, policy); action is
// the precise event. kind is the coarse kind older slotctl printed:
// bootstrap, node_added, node_changed, node_removed, move_started,
// move_phase, slot_moved, move_aborted, plan or cluster. version is 0 for
// changes outside the versioned table (plans, throttle). slot, from and to
// are set only for moves (slot is null otherwise).
type historyJSON struct {
	Entries []historyEntryJSON `json:"entries"`
}

type historyEntryJSON struct {
	Version  uint64  `json:"version"`
	Time     string  `json:"time"`
	Category string  `json:"category"`
	Action   string  `json:"action"`
	Kind     string  `json:"kind"`
	Slot     *uint32 `json:"slot"`
	From     string  `json:"from"`
	To       string  `json:"to"`
	NodeID   string  `json:"node_id"`
	MoveID   string  `json:"move_id"`
	PlanID   string  `json:"plan_id"`
	Operator string  `json:"operator"`
	Reason   string  `json:"reason"`
	Detail   string  `json:"detail"`
}

type historyOptions struct {
	limit   int
	plan    string
	node    string
	since   uint64
	kind    string
	reverse bool
}

var logKindOf = map[string]slotdv1.LogKind{
	"":        slotdv1.LogKind_LOG_KIND_UNSPECIFIED,
	"move":    slotdv1.LogKind_LOG_KIND_MOVE,
	"plan":    slotdv1.LogKind_LOG_KIND_PLAN,
	"node":    slotdv1.LogKind_LOG_KIND_NODE,
	"cluster": slotdv1.LogKind_LOG_KIND_CLUSTER,
}

func newHistoryCmd(g *globals) *cobra.Command {
	var o historyOptions
	cmd := &cobra.Command{
		Use:   "history [--kind move|plan|node|cluster] [--limit N] [--reverse]",
		Short: "Show what happened, newest first: who did what, when and why",
		Long: `history lists the audit log (every operator action on plans, nodes and the
cluster, with the caller's authenticated identity and --reason) together with
the per-move history (each move's start, phases, commit or abort), newest
first. The audit log is kept apart from the per-move history, so a long
rebalance does not push node and cluster events out. --kind picks one part:
move, plan, node or cluster. --reverse prints the same entries oldest first.`,
		Example: `  slotctl history --limit 20
  slotctl history --kind node
  slotctl history --plan p-12-3f9a1c0b2d4e --reverse
  slotctl history --node n4 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.limit < 1 {
				return usagef("--limit must be at least 1")
			}
			kind, ok := logKindOf[o.kind]
			if !ok {
				return usagef("--kind %q: want move, plan, node or cluster", o.kind)
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				cctx, cancel := g.call(ctx)
				defer cancel()
				resp, err := c.op.Log(cctx, &slotdv1.LogRequest{Kind: kind, Limit: uint32(min(o.limit, 10000)),
					Reverse: o.reverse, PlanId: o.plan, NodeId: o.node})
				if err != nil {
					return err
				}
				out := historyJSON{Entries: []historyEntryJSON{}}
				for _, e := range resp.GetEntries() {
					if o.since > 0 && e.GetVersion() <= o.since {
						continue
					}
					h := historyEntryJSON{
						Version: e.GetVersion(), Time: timeJSON(e.GetTime()), Category: logCategory(e.GetKind()),
						Action: e.GetAction(), Kind: coarseKind(e), From: e.GetFrom(), To: e.GetTo(), NodeID: e.GetNodeId(),
						MoveID: e.GetMoveId(), PlanID: e.GetPlanId(), Operator: e.GetOperator(), Reason: e.GetReason(),
						Detail: e.GetDetail(),
					}
					if e.GetHasSlot() {
						s := e.GetSlot()
						h.Slot = &s
					}
					out.Entries = append(out.Entries, h)
				}
				return g.print(out, func(w io.Writer) error {
					if len(out.Entries) == 0 {
						_, err := fmt.Fprintln(w, "no entries")
						return err
					}
					t := newTable(w, "TIME", "VERSION", "KIND", "ACTION", "WHAT", "PLAN", "OPERATOR", "REASON")
					for i, h := range out.Entries {
						version := "-"
						if h.Version > 0 {
							version = fmt.Sprint(h.Version)
						}
						t.row(formatTime(resp.GetEntries()[i].GetTime()), version, h.Category, h.Action, historyWhat(h),
							orDash(h.PlanID), orDash(h.Operator), orDash(h.Reason))
					}
					return t.flush()
				})
			})
		},
	}
	cmd.Flags().IntVar(&o.limit, "limit", 20, "show at most this many of the newest entries")
	cmd.Flags().StringVar(&o.kind, "kind", "", "only this kind: move, plan, node or cluster")
	cmd.Flags().BoolVar(&o.reverse, "reverse", false, "oldest first")
	cmd.Flags().StringVar(&o.plan, "plan", "", "only entries of this plan")
	cmd.Flags().StringVar(&o.node, "node", "", "only entries about this node")
	cmd.Flags().Uint64Var(&o.since, "since", 0, "only versioned changes after this directory version")
	return cmd
}

func logCategory(k slotdv1.LogKind) string { return enumName(k, "LOG_KIND_") }

// coarseKind is the kind older slotctl printed for an entry.
func coarseKind(e *slotdv1.LogEntry) string {
	a := e.GetAction()
	switch {
	case a == "bootstrap":
		return "bootstrap"
	case a == "node-register" || a == "node-add":
		return "node_added"
	case a == "node-remove":
		return "node_removed"
	case strings.HasPrefix(a, "node-"):
		return "node_changed"
	case a == "move-begin":
		return "move_started"
	case a == "move-advance":
		return "move_phase"
	case a == "move-commit":
		return "slot_moved"
	case a == "move-abort":
		return "move_aborted"
	case e.GetKind() == slotdv1.LogKind_LOG_KIND_PLAN:
		return "plan"
	}
	return "cluster"
}

// historyWhat says in a few words what an entry changed.
func historyWhat(h historyEntryJSON) string {
	var what string
	switch {
	case h.Slot != nil:
		what = fmt.Sprintf("slot %d %s->%s", *h.Slot, h.From, h.To)
	case h.NodeID != "":
		what = "node " + h.NodeID
	}
	switch {
	case what == "":
		return orDash(h.Detail)
	case h.Detail != "":
		return what + ": " + h.Detail
	}
	return what
}
