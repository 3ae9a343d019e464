package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

func init() { register(newLookupCmd) }

// lookupJSON is one element of `slotctl lookup -o json` (an array, in
// argument order: keys first, then --slot values):
//
//	{"key": "user:42", "slot": 1234, "owner": "n1", "address": "127.0.0.1:7501",
//	 "version": 12, "migration": null}
//
// key is "" for a --slot lookup; migration, when the slot is moving, is
// {"from": "n1", "to": "n4", "phase": "copying", "move_id": "..."}.
type lookupJSON struct {
	Key       string         `json:"key"`
	Slot      uint32         `json:"slot"`
	Owner     string         `json:"owner"`
	Address   string         `json:"address"`
	Version   uint64         `json:"version"`
	Migration *migrationJSON `json:"migration"`
}

type lookupOptions struct{ slots []string }

// maxLookupSlots bounds --slot: each slot is one request; a whole map is
// slotctl map's job.
const maxLookupSlots = 1024

func newLookupCmd(g *globals) *cobra.Command {
	var o lookupOptions
	cmd := &cobra.Command{
		Use:   "lookup [KEY...]",
		Short: "Ask slotd for the slot, owner and address of keys or slots",
		Example: `  slotctl lookup user:42 '{user:42}:cart'
  slotctl lookup --slot 0 --slot 16383 -o json
  slotctl lookup --slot 1-5,7`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(o.slots) == 0 {
				return usagef("give at least one KEY or --slot N")
			}
			reqs := make([]*slotdv1.LookupRequest, 0, len(args)+len(o.slots))
			for _, k := range args {
				if k == "" {
					return usagef("an empty key has no slot")
				}
				reqs = append(reqs, &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Key{Key: []byte(k)}})
			}
			n := 0
			for _, arg := range o.slots {
				set, err := slots.ParseSet(arg)
				if err != nil {
					return usagef("--slot %q: %v (give slots and ranges, e.g. 1-5,7)", arg, err)
				}
				if n += set.Count(); n > maxLookupSlots {
					return usagef("--slot names more than %d slots; see whole ranges with slotctl map", maxLookupSlots)
				}
				for s := range set.All() {
					reqs = append(reqs, &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Slot{Slot: uint32(s.Int())}})
				}
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				out := make([]lookupJSON, 0, len(reqs))
				for _, req := range reqs {
					cctx, cancel := g.call(ctx)
					r, err := c.dir.Lookup(cctx, req)
					cancel()
					if err != nil {
						return err
					}
					l := lookupJSON{Key: string(req.GetKey()), Slot: r.GetSlot(), Owner: r.GetOwner(), Address: r.GetAddress(), Version: r.GetVersion()}
					if mg := r.GetMigration(); mg != nil {
						l.Migration = &migrationJSON{Slot: int(mg.GetSlot()), From: mg.GetFrom(), To: mg.GetTo(), Phase: movePhase(mg.GetPhase()), MoveID: mg.GetMoveId()}
					}
					out = append(out, l)
				}
				return g.print(out, func(w io.Writer) error {
					t := newTable(w, "KEY", "SLOT", "OWNER", "ADDRESS", "VERSION", "MIGRATING")
					for _, l := range out {
						mig := "-"
						if l.Migration != nil {
							mig = fmt.Sprintf("%s->%s %s", l.Migration.From, l.Migration.To, l.Migration.Phase)
						}
						t.row(orDash(l.Key), l.Slot, l.Owner, l.Address, l.Version, mig)
					}
					return t.flush()
				})
			})
		},
	}
	cmd.Flags().StringArrayVar(&o.slots, "slot", nil, "look up slots instead of keys: a number (0-16383), a range or a list (1-5,7); repeatable")
	return cmd
}
