package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/load"
)

func init() { register(newTopCmd) }

// topKeysJSON is `slotctl top keys -o json`:
//
//	{"keys": [{"key": "{cart7}:42", "slot": 3330, "node": "n2", "rate": 840.5, "error": 12.1,
//	           "share": 0.31, "flagged": true, "truncated": false}],
//	 "load_unknown": ["n3"]}
//
// The cluster's hottest keys, hottest first, from each node's heavy-hitter
// sketch: rate is requests per second over about a minute, overestimated
// by at most error; share is rate over the node's capacity (its fair share
// of the cluster's ops, see clusterstatus.Measured); flagged is share > 0.2 (the
// RFC's threshold). A truncated key is its first 128 bytes.
type topKeysJSON struct {
	Keys        []topKeyJSON `json:"keys"`
	LoadUnknown []string     `json:"load_unknown"`
}

type topKeyJSON struct {
	Key       string   `json:"key"`
	Slot      uint16   `json:"slot"`
	Node      string   `json:"node"`
	Rate      float64  `json:"rate"`
	Error     float64  `json:"error"`
	Share     *float64 `json:"share"`
	Flagged   bool     `json:"flagged"`
	Truncated bool     `json:"truncated"`
}

// topSlotsJSON is `slotctl top slots -o json`:
//
//	{"by": "ops", "slots": [{"slot": 3330, "node": "n2", "keys": 120, "bytes": 20480,
//	   "reads_per_second": 700, "writes_per_second": 140.5, "ops_per_second": 840.5,
//	   "share": 1.33, "tag": "cart7"}], "load_unknown": []}
//
// The cluster's heaviest slots by ops (reads + writes per second, ~10
// minutes) or bytes, heaviest first; share is the slot's load in that
// dimension over its node's fair share (above 1 + tolerance, moving the
// slot cannot fix its node: a hot spot).
type topSlotsJSON struct {
	By          string        `json:"by"`
	Slots       []topSlotJSON `json:"slots"`
	LoadUnknown []string      `json:"load_unknown"`
}

type topSlotJSON struct {
	Slot   uint16   `json:"slot"`
	Node   string   `json:"node"`
	Keys   uint64   `json:"keys"`
	Bytes  uint64   `json:"bytes"`
	Reads  float64  `json:"reads_per_second"`
	Writes float64  `json:"writes_per_second"`
	Ops    float64  `json:"ops_per_second"`
	Share  *float64 `json:"share"`
	Tag    string   `json:"tag,omitempty"`
}

func newTopCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show the cluster's hottest keys or heaviest slots, from the stores' load reports",
		Example: `  slotctl top keys
  slotctl top slots --by bytes --limit 50 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("say what to show: slotctl top keys|slots (see slotctl top --help)")
		},
	}
	var limit int
	keys := &cobra.Command{
		Use:   "keys",
		Short: "The hottest keys with their rate and share of their node's capacity (above 20% flagged)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit <= 0 {
				return usagef("--limit must be positive")
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				v, err := g.topView(ctx, c, false)
				if err != nil {
					return err
				}
				return g.printTopKeys(v, limit)
			})
		},
	}
	keys.Flags().IntVar(&limit, "limit", 20, "show at most this many")
	var slimit int
	var by string
	slotsCmd := &cobra.Command{
		Use:   "slots",
		Short: "The heaviest slots by ops or bytes, with their share of their node's capacity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if slimit <= 0 {
				return usagef("--limit must be positive")
			}
			if by != load.DimOps && by != load.DimBytes {
				return usagef("--by %q: want ops or bytes", by)
			}
			return g.withConn(cmd.Context(), func(ctx context.Context, c *conn) error {
				v, err := g.topView(ctx, c, true)
				if err != nil {
					return err
				}
				return g.printTopSlots(v, by, slimit)
			})
		},
	}
	slotsCmd.Flags().IntVar(&slimit, "limit", 20, "show at most this many")
	slotsCmd.Flags().StringVar(&by, "by", load.DimOps, "ops or bytes")
	cmd.AddCommand(keys, slotsCmd)
	return cmd
}

func (g *globals) topView(ctx context.Context, c *conn, withSlots bool) (load.View, error) {
	cctx, cancel := g.call(ctx)
	defer cancel()
	v, ok, err := loadView(cctx, c, withSlots)
	if err == nil && !ok {
		err = fmt.Errorf("this slotd serves no load (slotd.v1.Load): upgrade it")
	}
	return v, err
}

func (g *globals) printTopKeys(v load.View, limit int) error {
	out := topKeysJSON{Keys: []topKeyJSON{}, LoadUnknown: v.Unknown()}
	for _, n := range v.Nodes {
		for _, k := range n.HotKeys {
			tk := topKeyJSON{Key: k.Key, Slot: k.Slot, Node: n.ID, Rate: k.Rate, Error: k.Err, Truncated: k.Truncated}
			if n.FairOps > 0 {
				s := k.Rate / n.FairOps
				tk.Share, tk.Flagged = &s, s > HotKeyFlag
			}
			out.Keys = append(out.Keys, tk)
		}
	}
	slices.SortStableFunc(out.Keys, func(a, b topKeyJSON) int {
		if a.Rate != b.Rate {
			if a.Rate > b.Rate {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	out.Keys = out.Keys[:min(limit, len(out.Keys))]
	return g.print(out, func(w io.Writer) error {
		if len(out.Keys) == 0 {
			fmt.Fprintln(w, "no hot keys reported")
		} else {
			t := newTable(w, "KEY", "SLOT", "NODE", "RATE/S", "±", "SHARE", "")
			for _, k := range out.Keys {
				flag := ""
				if k.Flagged {
					flag = "HOT: over 20% of its node"
				}
				t.row(keyText(k.Key, k.Truncated), k.Slot, k.Node, rateText(k.Rate), rateText(k.Error), shareText(k.Share), flag)
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		if len(out.LoadUnknown) > 0 {
			fmt.Fprintf(w, "\nload unknown (no report within 3 intervals): %s\n", strings.Join(out.LoadUnknown, ", "))
		}
		return nil
	})
}

func (g *globals) printTopSlots(v load.View, by string, limit int) error {
	out := topSlotsJSON{By: by, Slots: []topSlotJSON{}, LoadUnknown: v.Unknown()}
	for _, n := range v.Nodes {
		for _, s := range n.Slots {
			ts := topSlotJSON{Slot: s.Slot, Node: n.ID, Keys: uint64(s.Keys), Bytes: uint64(s.Bytes), Reads: s.Reads, Writes: s.Writes,
				Ops: s.Ops(), Tag: s.Tag}
			fair, val := n.FairOps, ts.Ops
			if by == load.DimBytes {
				fair, val = n.FairBytes, float64(ts.Bytes)
			}
			if fair > 0 {
				sh := val / fair
				ts.Share = &sh
			}
			out.Slots = append(out.Slots, ts)
		}
	}
	value := func(s topSlotJSON) float64 {
		if by == load.DimBytes {
			return float64(s.Bytes)
		}
		return s.Ops
	}
	slices.SortStableFunc(out.Slots, func(a, b topSlotJSON) int {
		if va, vb := value(a), value(b); va != vb {
			if va > vb {
				return -1
			}
			return 1
		}
		return int(a.Slot) - int(b.Slot)
	})
	out.Slots = out.Slots[:min(limit, len(out.Slots))]
	return g.print(out, func(w io.Writer) error {
		if len(out.Slots) == 0 {
			fmt.Fprintln(w, "no slot load reported")
		} else {
			t := newTable(w, "SLOT", "NODE", "KEYS", "BYTES", "READS/S", "WRITES/S", "OPS/S", "SHARE", "TAG")
			for _, s := range out.Slots {
				tag := "-"
				if s.Tag != "" {
					tag = "{" + s.Tag + "}"
				}
				t.row(s.Slot, s.Node, s.Keys, formatBytes(s.Bytes), rateText(s.Reads), rateText(s.Writes), rateText(s.Ops), shareText(s.Share), tag)
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		if len(out.LoadUnknown) > 0 {
			fmt.Fprintf(w, "\nload unknown (no report within 3 intervals): %s\n", strings.Join(out.LoadUnknown, ", "))
		}
		return nil
	})
}

func shareText(s *float64) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100**s)
}
