package mover

import (
	"math"
	"slices"
	"strings"
	"testing"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// TestStatsLoad: a store's answer counts for the slots it owns; an answer
// that makes no sense is refused whole, with the reason.
func TestStatsLoad(t *testing.T) {
	owners := make([]string, slots.Count)
	for i := range owners {
		owners[i] = "n1"
	}
	owners[7] = "n2"
	stat := func(s uint32, keys, bytes uint64, w float64) *slotdv1.SlotStat {
		return &slotdv1.SlotStat{Slot: s, Keys: keys, Bytes: bytes, WritesPerSecond: w}
	}
	rated := func(s uint32, keys, bytes uint64, r, w float64) *slotdv1.SlotStat {
		st := stat(s, keys, bytes, 99) // the one-minute writes: not what a report carries
		st.Rates = &slotdv1.SlotRates{Reads_10M: r, Writes_10M: w, Reads_1M: 98, Writes_1M: 97}
		return st
	}
	tests := []struct {
		name  string
		stats []*slotdv1.SlotStat
		want  []planner.SlotLoad
		rated bool
		err   string
	}{
		{"owned slots, another's left out", []*slotdv1.SlotStat{stat(3, 2, 100, 1.5), stat(7, 1, 50, 0)},
			[]planner.SlotLoad{{Slot: 3, Keys: 2, Bytes: 100, Writes: 1.5}}, false, ""},
		{"with rates: the long averages, as a report's", []*slotdv1.SlotStat{rated(3, 2, 100, 4, 1.5), rated(7, 1, 50, 1, 1)},
			[]planner.SlotLoad{{Slot: 3, Keys: 2, Bytes: 100, Reads: 4, Writes: 1.5}}, true, ""},
		{"a slot without rates: the answer is not rated", []*slotdv1.SlotStat{rated(3, 2, 100, 4, 1.5), stat(4, 1, 50, 2)},
			[]planner.SlotLoad{{Slot: 3, Keys: 2, Bytes: 100, Reads: 4, Writes: 1.5}, {Slot: 4, Keys: 1, Bytes: 50, Writes: 2}}, false, ""},
		{"a read rate that is not a number", []*slotdv1.SlotStat{rated(3, 1, 10, math.Inf(1), 0)}, nil, false, "reads per second"},
		{"a slot out of range", []*slotdv1.SlotStat{stat(slots.Count, 1, 1, 0)}, nil, false, "out of range"},
		{"a slot twice", []*slotdv1.SlotStat{stat(3, 1, 10, 0), stat(3, 1, 10, 0)}, nil, false, "twice"},
		{"more keys than bytes", []*slotdv1.SlotStat{stat(3, 11, 10, 0)}, nil, false, "11 keys in 10 bytes"},
		{"an absurd size", []*slotdv1.SlotStat{stat(3, 1, maxSlotBytes+1, 0)}, nil, false, "more than"},
		{"a rate that is not a number", []*slotdv1.SlotStat{stat(3, 1, 10, math.NaN())}, nil, false, "writes per second"},
		{"a negative rate", []*slotdv1.SlotStat{stat(3, 1, 10, -1)}, nil, false, "writes per second"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nl, isRated, err := statsLoad(&slotdv1.SlotStatsResponse{Slots: tc.stats}, "n1", owners)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(nl.Slots, tc.want) || isRated != tc.rated {
				t.Fatalf("load %+v rated %v %v, want %+v rated %v", nl.Slots, isRated, err, tc.want, tc.rated)
			}
		})
	}
}

// TestMeasured: a plan's load takes each store's fresh keys and bytes over
// its report's, measures a node without a report by its answer (not in ops
// mode), and knows a node owning nothing to be empty.
func TestMeasured(t *testing.T) {
	loads := map[string]planner.NodeLoad{
		// n1's report: from before its data was loaded, with its rates.
		"n1": {Slots: []planner.SlotLoad{{Slot: 1, Keys: 1, Bytes: 10, Reads: 5, Writes: 2}, {Slot: 2, Keys: 1, Bytes: 10, Reads: 1}}},
	}
	stats := &Stats{Nodes: map[string]planner.NodeLoad{
		"n1": {Slots: []planner.SlotLoad{{Slot: 1, Keys: 100, Bytes: 9000, Writes: 3}, {Slot: 3, Keys: 5, Bytes: 500}}},
		"n2": {Slots: []planner.SlotLoad{{Slot: 9, Keys: 50, Bytes: 4000, Writes: 1}}},
	}}
	counts := map[string]int{"n1": 8000, "n2": 8384, "n3": 0}

	got, filled := measured(loads, stats, counts, planner.BalanceAuto)
	wantN1 := []planner.SlotLoad{
		{Slot: 1, Keys: 100, Bytes: 9000, Reads: 5, Writes: 2}, // fresh size, the report's rates
		{Slot: 2, Keys: 0, Bytes: 0, Reads: 1},                 // empty now
		{Slot: 3, Keys: 5, Bytes: 500},                         // not in the report: idle
	}
	if !slices.Equal(got["n1"].Slots, wantN1) {
		t.Fatalf("n1 %+v, want %+v", got["n1"].Slots, wantN1)
	}
	if !slices.Equal(got["n2"].Slots, stats.Nodes["n2"].Slots) || !slices.Equal(filled, []string{"n2"}) {
		t.Fatalf("n2 %+v, filled %v: want n2 measured by its answer", got["n2"], filled)
	}
	if n3, ok := got["n3"]; !ok || len(n3.Slots) != 0 {
		t.Fatalf("n3 owns nothing: %+v %v, want known empty", n3, ok)
	}
	if loads["n1"].Slots[0].Bytes != 10 {
		t.Fatal("measured changed its input")
	}

	got, filled = measured(loads, stats, counts, planner.BalanceOps)
	if _, ok := got["n2"]; ok || len(filled) != 0 {
		t.Fatalf("ops mode measured n2 without a report (its reads are unknown): %+v", got["n2"])
	}

	// Answers with rates, as a report sent now would carry them, are newer
	// than the reports in every figure.
	stats.Rated = []string{"n1", "n2"}
	got, filled = measured(loads, stats, counts, planner.BalanceOps)
	wantN1 = []planner.SlotLoad{
		{Slot: 1, Keys: 100, Bytes: 9000, Writes: 3}, // fresh size and rates
		{Slot: 2, Keys: 0, Bytes: 0, Reads: 1},       // empty now: the report's rates
		{Slot: 3, Keys: 5, Bytes: 500},               // fresh: idle
	}
	if !slices.Equal(got["n1"].Slots, wantN1) {
		t.Fatalf("rated n1 %+v, want %+v", got["n1"].Slots, wantN1)
	}
	if !slices.Equal(filled, []string{"n2"}) {
		t.Fatalf("ops mode with n2's rates: filled %v, want n2 measured by its answer", filled)
	}

	if got, _ := measured(nil, nil, counts, planner.BalanceAuto); len(got) != 0 {
		t.Fatalf("nothing measured, yet %+v", got)
	}
}
