package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
)

func init() { registerNodes(newNodesFailCmd) }

// nodeFailJSON is `slotctl nodes fail -o json`:
//
//	{"node": "n3", "version": 41, "applied": true, "slots": "0-99,120",
//	 "slot_count": 101, "estimated_bytes_lost": null,
//	 "new_owners": {"n1": 51, "n2": 50}, "moves_ended": 0}
//
// estimated_bytes_lost is null when no report of the node's data is at
// hand; version is the preview's when applied is false.
type nodeFailJSON struct {
	Node       string            `json:"node"`
	Version    uint64            `json:"version"`
	Applied    bool              `json:"applied"`
	Slots      string            `json:"slots"`
	SlotCount  uint32            `json:"slot_count"`
	BytesLost  *int64            `json:"estimated_bytes_lost"`
	NewOwners  map[string]uint32 `json:"new_owners"`
	MovesEnded uint32            `json:"moves_ended"`
}

type nodesFailOptions struct {
	acceptLoss bool
	dryRun     bool
	yes        bool
	reason     string
}

func newNodesFailCmd(g *globals) *cobra.Command {
	var o nodesFailOptions
	cmd := &cobra.Command{
		Use:   "fail ID --accept-data-loss",
		Short: "Declare a node lost for good: its slots get new owners, EMPTY (its data is lost)",
		Long: `Declare a node that will never come back failed. Its slots get new owners at
once, empty: every key they held is lost. Only a node down for at least the
hold-down, with no live lease, can be declared failed. The planner's drain
targets spread the slots over the active nodes, in one directory version,
and history records "data lost: ID declared failed by <you>".

If the node comes back with its old data it serves none of it: it finds
itself owning nothing, drops the old data through reconciliation and
rejoins empty.

Without --yes it shows the preview (slots, estimated bytes lost, new
owners) and asks; --dry-run only previews.`,
		Example: `  slotctl nodes fail n3 --dry-run
  slotctl nodes fail n3 --accept-data-loss
  slotctl nodes fail n3 --accept-data-loss --yes --reason "disk gone"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := checkNodeID(id); err != nil {
				return err
			}
			if !o.acceptLoss && !o.dryRun {
				return usagef("declaring %s failed loses every key of its slots: say --accept-data-loss (or --dry-run to preview)", id)
			}
			if !o.dryRun && !o.yes && !g.canAsk() {
				return usagef("not a terminal: give --yes to declare %s failed without being asked", id)
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				rc := slotdv1.NewRecoveryClient(c.cc)
				cctx, cancel := g.call(ctx)
				preview, err := rc.FailNode(cctx, &slotdv1.FailNodeRequest{NodeId: id, DryRun: true})
				cancel()
				if err != nil {
					return err
				}
				if o.dryRun {
					return g.printFail(id, preview)
				}
				if !o.yes {
					ask := g.stdout
					if g.output == "json" {
						ask = g.stderr
					}
					if err := printFailPreview(ask, id, preview); err != nil {
						return err
					}
					ok, err := confirm(ctx, ask, g.stdin, fmt.Sprintf("\ndeclare %s failed and lose its data? [y/N] ", id))
					if err != nil {
						return err
					}
					if !ok {
						return fmt.Errorf("not declared failed; nothing changed")
					}
				}
				cctx, cancel = g.call(ctx)
				defer cancel()
				resp, err := rc.FailNode(cctx, &slotdv1.FailNodeRequest{
					NodeId: id, AcceptDataLoss: true, ExpectVersion: preview.GetVersion(), Reason: o.reason, Operator: g.operator,
				})
				if err != nil {
					return err
				}
				return g.printFail(id, resp)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.acceptLoss, "accept-data-loss", false, "required: the node's data is lost")
	f.BoolVar(&o.dryRun, "dry-run", false, "only show what would happen")
	f.BoolVarP(&o.yes, "yes", "y", false, "do not ask")
	f.StringVar(&o.reason, "reason", "", "why, for history")
	return cmd
}

func failJSON(id string, r *slotdv1.FailNodeResponse) nodeFailJSON {
	out := nodeFailJSON{
		Node: id, Version: r.GetVersion(), Applied: r.GetApplied(), Slots: r.GetSlots(), SlotCount: r.GetSlotCount(),
		NewOwners: map[string]uint32{}, MovesEnded: r.GetMovesEnded(),
	}
	if r.GetBytesKnown() {
		b := r.GetEstimatedBytesLost()
		out.BytesLost = &b
	}
	for _, no := range r.GetNewOwners() {
		out.NewOwners[no.GetNodeId()] = no.GetSlots()
	}
	return out
}

func (g *globals) printFail(id string, r *slotdv1.FailNodeResponse) error {
	return g.print(failJSON(id, r), func(w io.Writer) error {
		if !r.GetApplied() {
			return printFailPreview(w, id, r)
		}
		_, err := fmt.Fprintf(w, "node %s declared failed at version %d: %d slots to new owners, empty (%s); its data is lost\n",
			id, r.GetVersion(), r.GetSlotCount(), ownersText(r))
		return err
	})
}

func printFailPreview(w io.Writer, id string, r *slotdv1.FailNodeResponse) error {
	lost := "unknown (no report of its data at hand)"
	if r.GetBytesKnown() {
		lost = "~" + formatBytes(uint64(r.GetEstimatedBytesLost())) + " (estimated)"
	}
	_, err := fmt.Fprintf(w, "declaring %s failed at version %d LOSES ITS DATA:\n  slots:       %s (%d)\n  bytes lost:  %s\n  new owners:  %s (empty)\n  moves ended: %d\n",
		id, r.GetVersion(), orDash(r.GetSlots()), r.GetSlotCount(), lost, ownersText(r), r.GetMovesEnded())
	return err
}

func ownersText(r *slotdv1.FailNodeResponse) string {
	var parts []string
	for _, no := range r.GetNewOwners() {
		parts = append(parts, fmt.Sprintf("%s %d", no.GetNodeId(), no.GetSlots()))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
