package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slotd/slotd/mover/planner/simplan"
	"github.com/slotd/slotd/ringcompat"
)

func init() { register(newSimulateCmd) }

// simulateOptions are the flags of `slotctl simulate`.
type simulateOptions struct {
	keys, nodes, add int
	vnodes           string
	hash             string
}

// The JSON form of `slotctl simulate -o json` is ringcompat.SimResult:
//
//	{"keys":100000,"nodes":4,"add":1,"hash":"md5","ideal_moved_pct":20,
//	 "rows":[{"scheme":"mod N","vnodes":0,"moved_pct":79.9,"moved_keys":79913,
//	          "before":{"min":24851,"max":25194},"after":{"min":..,"max":..},
//	          "only_to_new":false}, ...]}
//
// Rows: "mod N", then "ring" once per --vnodes entry, then "fixed slots".

func newSimulateCmd(g *globals) *cobra.Command {
	o := &simulateOptions{}
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Show, offline, how many keys move when nodes join: hash % N, a ring, fixed slots",
		Long: `simulate places keys user:0, user:1, ... on servers server0, server1, ... and
adds --add servers, then reports for each scheme the keys that changed server
and the fewest/most keys on one server before and after:

  mod N        server = hash(key) % N
  ring         a consistent-hash ring with --vnodes points per server
               (points at hash("server{s}#{r}")), once per --vnodes entry
  fixed slots  slotd: key -> one of 16384 slots (xxhash, whatever --hash says);
               slots bootstrapped from the ring and balanced by the planner,
               then the planner's minimum-move plan for the new node set

With --hash seed000 the ring points are the reference ring's, for node numbers.
"only to new" says whether every moved key went to an added server. No server
is needed. With --hash md5 and the defaults it reproduces the table of the
published md5 ring simulation (79.9% / 9.0% / 22.4%).

-o json prints {"keys","nodes","add","hash","ideal_moved_pct","rows":[{"scheme",
"vnodes","moved_pct","moved_keys","before":{"min","max"},"after":{"min","max"},
"only_to_new"}]}; rows: mod N, then ring per --vnodes entry, then fixed slots.`,
		Example: `  slotctl simulate --keys 100000 --nodes 4 --add 1 --vnodes 1,100 --hash md5
  slotctl simulate --nodes 10 --add 2 --vnodes 128 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config()
			if err != nil {
				return err
			}
			res, err := ringcompat.Simulate(cfg)
			if err != nil {
				return err
			}
			return g.print(res, func(w io.Writer) error { return printSimulation(w, res) })
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.keys, "keys", 100_000, "number of keys (user:0 ... user:N-1)")
	f.IntVar(&o.nodes, "nodes", 4, "servers before the add")
	f.IntVar(&o.add, "add", 1, "servers added")
	f.StringVar(&o.vnodes, "vnodes", "1,100", "ring points per server, comma-separated: one ring row each")
	f.StringVar(&o.hash, "hash", "xxhash", "key and point hash for mod N and the rings: xxhash, seed000 or md5")
	return cmd
}

// config turns the flags into a simulation, or a usage error naming the flag.
func (o *simulateOptions) config() (ringcompat.SimConfig, error) {
	h, err := ringcompat.HashByName(o.hash)
	if err != nil {
		return ringcompat.SimConfig{}, usagef("--hash %q: use xxhash, seed000 or md5", o.hash)
	}
	var vnodes []int
	for part := range strings.SplitSeq(o.vnodes, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || v <= 0 {
			return ringcompat.SimConfig{}, usagef("--vnodes %q: want positive integers separated by commas, such as 1,100", o.vnodes)
		}
		vnodes = append(vnodes, v)
	}
	cfg := ringcompat.SimConfig{
		Keys: o.keys, Nodes: o.nodes, Add: o.add, VNodes: vnodes, Hash: h,
		Rebalance: simplan.Rebalance,
	}
	switch {
	case o.keys <= 0 || o.keys > ringcompat.MaxSimKeys:
		return cfg, usagef("--keys %d: want 1 to %d", o.keys, ringcompat.MaxSimKeys)
	case o.nodes <= 0:
		return cfg, usagef("--nodes %d: want at least 1", o.nodes)
	case o.add < 0:
		return cfg, usagef("--add %d: want 0 or more", o.add)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

func printSimulation(w io.Writer, res *ringcompat.SimResult) error {
	fmt.Fprintf(w, "%d keys, %d -> %d servers, hash %s\n\n", res.Keys, res.Nodes, res.Nodes+res.Add, res.Hash)
	t := newTable(w, "SCHEME", "MOVED", "KEYS MOVED",
		fmt.Sprintf("BEFORE MIN/MAX (%d)", res.Nodes), fmt.Sprintf("AFTER MIN/MAX (%d)", res.Nodes+res.Add), "ONLY TO NEW")
	for _, r := range res.Rows {
		name := r.Scheme
		switch {
		case r.Scheme == "ring" && r.VNodes == 1:
			name = "ring, 1 pt"
		case r.Scheme == "ring":
			name = fmt.Sprintf("ring, %d pts", r.VNodes)
		}
		only := "no"
		if r.OnlyToNew {
			only = "yes"
		}
		t.row(name, fmt.Sprintf("%.1f%%", r.MovedPct), r.MovedKeys,
			fmt.Sprintf("%d / %d", r.Before.Min, r.Before.Max), fmt.Sprintf("%d / %d", r.After.Min, r.After.Max), only)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nleast any balanced scheme can move: %.1f%% (%d new of %d servers)\n", res.IdealPct, res.Add, res.Nodes+res.Add)
	return err
}
