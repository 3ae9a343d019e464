package main

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/slots"
)

// minimalName is the minimal slot table's case: the least any SDK routing
// by slot can do, the yardstick of Route's 16-byte target.
const minimalName = "minimal slot table: slots.ForKey + atomic.Pointer"

// minimalTarget is the most Route may cost over the minimal slot table,
// on the 16-byte keys, in every block of the paired measurement.
const minimalTarget = 1.1

// slotTable is the smallest routing table by slot: an owner index per slot.
type slotTable struct {
	owners [slots.Count]uint16
	names  []string
}

func newSlotTable(m *slotmap.Map, names []string) *slotTable {
	t := &slotTable{names: names}
	index := make(map[string]uint16, len(names))
	for i, n := range names {
		index[n] = uint16(i)
	}
	for s := range slots.Count {
		t.owners[s] = index[m.OwnerID(slots.MustNew(s))]
	}
	return t
}

// minimalLoop returns the minimal slot table as a loop over keys (numKeys
// of them) of the same shape as makeLoops': load the table's pointer, then
// the owner's name through the slot, its length summed into a local.
// Not inlined, for the reason makeLoops gives.
//
//go:noinline
func minimalLoop(p *atomic.Pointer[slotTable], keys [][]byte) loop {
	const mask = numKeys - 1
	return func(n, off int) uint64 {
		var sum uint64
		for i := 0; i < n; i++ {
			t := p.Load()
			sum += uint64(len(t.names[t.owners[slots.ForKey(keys[(i+off)&mask]).Uint16()&(slots.Count-1)]]))
		}
		return sum
	}
}

// minimalRow is the row of Route against the minimal slot table at n nodes.
func minimalRow(n int, p pairedResult) string {
	return fmt.Sprintf("| %s nodes | %d pairs (%d blocks) | %.2f ns | %.2f ns | **%.2f** | %.2f-%.2f | %.2f | %s |",
		fmtInt(n), p.pairs, p.blocks, p.floorNs, p.oursNs, p.ratio, p.q1, p.q3, p.worst, verdictWithin(p, minimalTarget))
}

// verdictWithin says whether the paired ratio p is within target in every
// block (and so overall).
func verdictWithin(p pairedResult, target float64) string {
	if p.ratio <= target && p.worst <= target {
		return "met"
	}
	return "NOT met"
}

// printMinimal prints the section of Route against the minimal slot table.
func printMinimal(w io.Writer, rows []string, pairs, blocks int, command string) {
	fmt.Fprintf(w, "\n#### Route within %.1fx of the minimal slot table, 16-byte keys, in every block\n\n"+
		"What any SDK must do at least: the \"%s\" case above (an `atomic.Pointer` to an owner index per slot and the "+
		"node names) against `client.Route(key)` then `Owner()`, on the same 16-byte keys, measured side by side as above: "+
		"%d pairs of chunks in %d blocks, the minimal table's chunk in the place of the floor's; the target counts as met "+
		"only when every block's median ratio is within %.1fx. Command: `%s`.\n\n",
		minimalTarget, minimalName, pairs, blocks, minimalTarget, command)
	fmt.Fprintln(w, "| nodes | pairs | minimal table (median ns/op) | Route (median ns/op) | Route / minimal (median of pairs) | quartiles | worst block | within 1.1x in every block |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	fmt.Fprintln(w, strings.Join(rows, "\n"))
}
