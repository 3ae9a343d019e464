package main

import (
	"testing"

	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// table gives the first counts[0] slots to "a", the next counts[1] to "b", ...
func table(counts ...int) []string {
	owners := make([]string, 0, slots.Count)
	for i, c := range counts {
		for range c {
			owners = append(owners, string(rune('a'+i)))
		}
	}
	return owners
}

func TestMinimum(t *testing.T) {
	active := func(id string) planner.Node { return planner.Node{ID: id, Weight: 1, State: planner.StateActive} }
	draining := func(id string) planner.Node { return planner.Node{ID: id, Weight: 1, State: planner.StateDraining} }
	cases := []struct {
		name  string
		in    planner.Input
		moves int
	}{
		{"all on a, b added", planner.Input{Owners: table(slots.Count), Nodes: []planner.Node{active("a"), active("b")}}, 8192},
		// 16384 = 3 x 5461 + 1: a, holding most, keeps the extra slot.
		{"all on a, two added", planner.Input{Owners: table(slots.Count), Nodes: []planner.Node{active("a"), active("b"), active("c")}}, slots.Count - 5462},
		// b gives all 6384; a gives its 1808 above 8192.
		{"b drains", planner.Input{Owners: table(10000, 6384), Nodes: []planner.Node{active("a"), draining("b"), active("c")}}, 6384 + 1808},
		{"balanced", planner.Input{Owners: table(8192, 8192), Nodes: []planner.Node{active("a"), active("b")}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := minimum(tc.in); got != tc.moves {
				t.Fatalf("minimum %d, want %d", got, tc.moves)
			}
			p, err := planner.Compute(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if err := check(p, tc.in); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCheckRejectsUnbalanced(t *testing.T) {
	in := planner.Input{Owners: table(slots.Count), Nodes: []planner.Node{
		{ID: "a", Weight: 1, State: planner.StateActive}, {ID: "b", Weight: 1, State: planner.StateActive},
	}}
	half := &planner.Plan{}
	for s := range 100 { // far short of the 8192 moves needed
		half.Moves = append(half.Moves, planner.Move{Slot: s, From: "a", To: "b"})
	}
	if err := check(half, in); err == nil {
		t.Fatal("check accepted a plan that leaves a with 16284 slots")
	}
	wrong := &planner.Plan{Moves: []planner.Move{{Slot: 0, From: "b", To: "a"}}}
	if err := check(wrong, in); err == nil {
		t.Fatal("check accepted a move from a node that does not own the slot")
	}
}
