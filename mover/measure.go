package mover

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slotd/slotd/mover/planner"
)

// measured is the load a plan is made on: the nodes' load reports, with
// each node's keys and bytes as its store answered them just now (a report
// may be up to an interval old, or from before the data was loaded), and
// its request rates too when the answer carried them (Stats.Rated: the
// rates a report sent now would carry, so a plan made right after a bulk
// load sees its writes); a node that has not reported yet measured by that
// answer alone; and a node owning no slot known to be empty. In ops mode a
// node without a report stays unknown unless its answer carried rates: an
// older store's answer says nothing of its reads. counts holds every
// node's slot count. It returns the loads and the nodes measured by their
// answer alone.
func measured(loads map[string]planner.NodeLoad, stats *Stats, counts map[string]int, mode planner.BalanceBy) (map[string]planner.NodeLoad, []string) {
	out := maps.Clone(loads)
	if out == nil {
		out = map[string]planner.NodeLoad{}
	}
	var filled []string
	if stats != nil {
		for _, id := range slices.Sorted(maps.Keys(stats.Nodes)) {
			fresh := stats.Nodes[id]
			rep, ok := out[id]
			rated := slices.Contains(stats.Rated, id)
			switch {
			case ok:
				out[id] = freshLoad(rep, fresh, rated)
			case rated || mode != planner.BalanceOps:
				out[id] = fresh
				filled = append(filled, id)
			}
		}
	}
	if len(out) > 0 {
		for id, c := range counts {
			if _, ok := out[id]; !ok && c == 0 {
				out[id] = planner.NodeLoad{} // owns nothing: holds nothing
			}
		}
	}
	return out, filled
}

// freshLoad is rep with the keys and bytes of fresh, the node's answer
// read just now, and its rates too when rated: a slot the answer does not
// list is empty (its rates, if any, are the report's); one the report does
// not list is idle unless the answer's rates say otherwise.
func freshLoad(rep, fresh planner.NodeLoad, rated bool) planner.NodeLoad {
	now := make(map[uint16]planner.SlotLoad, len(fresh.Slots))
	for _, s := range fresh.Slots {
		now[s.Slot] = s
	}
	out := planner.NodeLoad{HotKeys: rep.HotKeys, Slots: make([]planner.SlotLoad, 0, max(len(rep.Slots), len(fresh.Slots)))}
	for _, s := range rep.Slots {
		f, found := now[s.Slot]
		delete(now, s.Slot)
		s.Keys, s.Bytes = f.Keys, f.Bytes
		if rated && found {
			s.Reads, s.Writes = f.Reads, f.Writes
		}
		out.Slots = append(out.Slots, s)
	}
	for _, f := range now {
		if !rated {
			f.Reads, f.Writes = 0, 0
		}
		out.Slots = append(out.Slots, planner.SlotLoad{Slot: f.Slot, Keys: f.Keys, Bytes: f.Bytes, Reads: f.Reads, Writes: f.Writes})
	}
	slices.SortFunc(out.Slots, func(a, b planner.SlotLoad) int { return int(a.Slot) - int(b.Slot) })
	return out
}

// measuredNote says which nodes a plan measured by their stores' answers
// alone, and whose answers it could not use and why; "" when none.
// rated lists the nodes whose answers carried their rates.
func measuredNote(filled, rated []string, unknown *sizesUnknownError) string {
	var parts []string
	var withRates, sizesOnly []string
	for _, id := range filled {
		if slices.Contains(rated, id) {
			withRates = append(withRates, id)
		} else {
			sizesOnly = append(sizesOnly, id)
		}
	}
	if len(withRates) > 0 {
		parts = append(parts, fmt.Sprintf("measured by their stores' answers now, no load report yet: %s", strings.Join(withRates, ", ")))
	}
	if len(sizesOnly) > 0 {
		parts = append(parts, fmt.Sprintf("measured by their slot sizes now, no load report yet (reads not known): %s", strings.Join(sizesOnly, ", ")))
	}
	if unknown != nil {
		for _, id := range unknown.Nodes {
			if why, ok := unknown.Reasons[id]; ok {
				parts = append(parts, fmt.Sprintf("slot sizes of %s ignored: %s", id, why))
			}
		}
	}
	return strings.Join(parts, "; ")
}
