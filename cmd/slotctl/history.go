package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { register(newHistoryCmd) }

// historyJSON is `slotctl history -o json`: the newest --limit matching
// directory changes, oldest first.
//
//	{"entries": [{"version": 9, "time": "2026-01-02T03:04:05.123Z", "kind": "slot_moved",
//	              "slot": 17, "from": "n1", "to": "n4", "node_id": "", "move_id": "...",
//	              "plan_id": "...", "operator": "alice", "reason": "..."}]}
//
// kind is one of bootstrap, node_added, node_changed, node_removed,
// move_started, move_phase, slot_moved, move_aborted, plan. slot, from and
// to are set only for moves (slot is null otherwise).
type historyJSON struct {
	Entries []historyEntryJSON `json:"entries"`
}

type historyEntryJSON struct {
	Version  uint64  `json:"version"`
	Time     string  `json:"time"`
	Kind     string  `json:"kind"`
	Slot     *uint32 `json:"slot"`
	From     string  `json:"from"`
	To       string  `json:"to"`
	NodeID   string  `json:"node_id"`
	MoveID   string  `json:"move_id"`
	PlanID   string  `json:"plan_id"`
	Operator string  `json:"operator"`
	Reason   string  `json:"reason"`
}

type historyOptions struct {
	limit int
	plan  string
	node  string
	since uint64
}

// historyPage is how many entries one History call asks for.
const historyPage = 1000

func newHistoryCmd(g *globals) *cobra.Command {
	var o historyOptions
	cmd := &cobra.Command{
		Use:   "history [--limit N]",
		Short: "Show the newest directory changes: who changed what, when and why",
		Example: `  slotctl history --limit 20
  slotctl history --node n4 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.limit < 1 {
				return usagef("--limit must be at least 1")
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				// slotd pages oldest first; keep the newest limit entries.
				var kept []*slotdv1.HistoryEntry
				since := o.since
				for {
					cctx, cancel := g.call(ctx)
					resp, err := c.admin.History(cctx, &slotdv1.HistoryRequest{SinceVersion: since, Limit: historyPage, PlanId: o.plan, NodeId: o.node})
					cancel()
					if err != nil {
						return err
					}
					kept = append(kept, resp.GetEntries()...)
					if over := len(kept) - o.limit; over > 0 {
						kept = kept[over:]
					}
					if resp.GetNextSinceVersion() == 0 || resp.GetNextSinceVersion() <= since {
						break
					}
					since = resp.GetNextSinceVersion()
				}
				out := historyJSON{Entries: []historyEntryJSON{}}
				for _, e := range kept {
					h := historyEntryJSON{
						Version: e.GetVersion(), Time: timeJSON(e.GetTime()), Kind: historyKind(e.GetKind()),
						From: e.GetFrom(), To: e.GetTo(), NodeID: e.GetNodeId(), MoveID: e.GetMoveId(),
						PlanID: e.GetPlanId(), Operator: e.GetOperator(), Reason: e.GetReason(),
					}
					if e.GetMoveId() != "" {
						s := e.GetSlot()
						h.Slot = &s
					}
					out.Entries = append(out.Entries, h)
				}
				return g.print(out, func(w io.Writer) error {
					t := newTable(w, "VERSION", "TIME", "KIND", "WHAT", "PLAN", "OPERATOR", "REASON")
					for i, h := range out.Entries {
						t.row(h.Version, formatTime(kept[i].GetTime()), h.Kind, historyWhat(h), orDash(h.PlanID), orDash(h.Operator), orDash(h.Reason))
					}
					return t.flush()
				})
			})
		},
	}
	cmd.Flags().IntVar(&o.limit, "limit", 20, "show at most this many of the newest entries")
	cmd.Flags().StringVar(&o.plan, "plan", "", "only entries of this plan")
	cmd.Flags().StringVar(&o.node, "node", "", "only entries about this node")
	cmd.Flags().Uint64Var(&o.since, "since", 0, "only entries after this directory version")
	return cmd
}

// historyWhat says in a few words what an entry changed.
func historyWhat(h historyEntryJSON) string {
	switch {
	case h.Slot != nil:
		return fmt.Sprintf("slot %d %s->%s", *h.Slot, h.From, h.To)
	case h.NodeID != "":
		return "node " + h.NodeID
	}
	return "-"
}
