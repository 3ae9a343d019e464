package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

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
		Use:   "hash KEY...|-",
		Short: "Print the slot of each key (offline, no server needed)",
		Long: `hash prints the slot of each key, computed locally. A "-" argument reads keys
from stdin instead, one a line (a trailing \r is dropped, empty lines skipped).`,
		Example: `  slotctl hash user:42 '{user:42}:cart'
  slotctl hash -o json foo
  cut -f1 keys.tsv | slotctl hash -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := make([]hashResult, 0, len(args))
			add := func(k string) {
				out = append(out, hashResult{Key: k, Tagged: slots.TaggedString(k), Slot: slots.ForString(k).Int()})
			}
			for _, k := range args {
				if k != "-" {
					add(k)
					continue
				}
				sc := bufio.NewScanner(g.stdin)
				sc.Buffer(make([]byte, 64<<10), 16<<20) // keys up to 16 MiB
				for sc.Scan() {
					if k := strings.TrimSuffix(sc.Text(), "\r"); k != "" {
						add(k)
					}
				}
				if err := sc.Err(); err != nil {
					return fmt.Errorf("read keys from stdin: %w", err)
				}
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
