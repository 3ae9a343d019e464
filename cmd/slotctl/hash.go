package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/slots"
)

func init() { register(newHashCmd) }

// hashResult is one line of `slotctl hash -o json`.
type hashResult struct {
	Key    string `json:"key"`
	Tagged string `json:"hashed_part"`
	Slot   int    `json:"slot"`
}

func newHashCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "hash KEY...",
		Short: "Print the slot of each key (offline, no server needed)",
		Example: `  slotctl hash user:42 '{user:42}:cart'
  slotctl hash -o json foo`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := make([]hashResult, 0, len(args))
			for _, k := range args {
				out = append(out, hashResult{Key: k, Tagged: slots.TaggedString(k), Slot: slots.ForString(k).Int()})
			}
			return g.print(out, func(w io.Writer) error {
				t := newTable(w, "KEY", "HASHED", "SLOT")
				for _, r := range out {
					t.row(r.Key, r.Tagged, r.Slot)
				}
				return t.flush()
			})
		},
	}
}
