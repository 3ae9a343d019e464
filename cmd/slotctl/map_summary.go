package main

import (
	"fmt"
	"io"

	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

// mapSummaryJSON is `slotctl map --summary -o json`: per node the number of
// slots, its share of the 16,384 and how many ranges they form; the slots
// with no owner and the moves in flight.
//
//	{"version": 12, "cluster_id": "...", "unassigned": 0, "migrations": 1,
//	 "nodes": [{"id": "n1", "address": "127.0.0.1:7501", "state": "active",
//	            "slots": 5461, "share_pct": 33.33, "ranges": 120}]}
type mapSummaryJSON struct {
	Version    uint64           `json:"version"`
	ClusterID  string           `json:"cluster_id"`
	Unassigned int              `json:"unassigned"`
	Migrations int              `json:"migrations"`
	Nodes      []mapSummaryNode `json:"nodes"`
}

type mapSummaryNode struct {
	ID       string  `json:"id"`
	Address  string  `json:"address"`
	State    string  `json:"state"`
	Slots    int     `json:"slots"`
	SharePct float64 `json:"share_pct"`
	Ranges   int     `json:"ranges"`
}

func summarizeMap(m *slotmap.Map) mapSummaryJSON {
	out := mapSummaryJSON{Version: m.Version(), ClusterID: m.ClusterID(), Unassigned: slots.Count,
		Migrations: len(m.Migrations()), Nodes: []mapSummaryNode{}}
	for _, n := range m.Nodes() {
		set := m.SlotsOf(n.ID)
		c := set.Count()
		out.Unassigned -= c
		out.Nodes = append(out.Nodes, mapSummaryNode{ID: n.ID, Address: n.Addr, State: nodeState(n.State), Slots: c,
			SharePct: float64(int(10000*float64(c)/slots.Count+0.5)) / 100, Ranges: len(set.Ranges())})
	}
	return out
}

func (g *globals) printMapSummary(m *slotmap.Map) error {
	out := summarizeMap(m)
	return g.print(out, func(w io.Writer) error {
		fmt.Fprintf(w, "version %d, %d nodes, %d slots unassigned, %d moving\n\n", out.Version, len(out.Nodes), out.Unassigned, out.Migrations)
		t := newTable(w, "NODE", "ADDRESS", "STATE", "SLOTS", "SHARE", "RANGES")
		for _, n := range out.Nodes {
			t.row(n.ID, n.Address, n.State, n.Slots, fmt.Sprintf("%.2f%%", n.SharePct), n.Ranges)
		}
		return t.flush()
	})
}
