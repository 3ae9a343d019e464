package planner

import (
	"testing"

	"github.com/slotd/slotd/slots"
)

// TestPlanBalanced: Balanced says the plan found nothing to do, in slot
// counts and in load; a plan with moves, or one that leaves a down node's
// slots blocked, is not.
func TestPlanBalanced(t *testing.T) {
	ids := []string{"a", "b", "c", "d"}
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = ids[s*len(ids)/slots.Count]
	}
	nodes := func(extra ...Node) []Node {
		var out []Node
		for _, id := range ids {
			out = append(out, Node{ID: id, Weight: 1, State: StateActive})
		}
		return append(out, extra...)
	}
	even := map[string]NodeLoad{}
	for s, o := range owners {
		nl := even[o]
		nl.Slots = append(nl.Slots, SlotLoad{Slot: uint16(s), Keys: 1, Bytes: 100, Reads: 1})
		even[o] = nl
	}
	down := nodes()
	down[3].State = StateDown
	tests := []struct {
		name string
		in   Input
		want bool
	}{
		{"slot counts at their targets", Input{Owners: owners, Nodes: nodes(), BalanceBy: BalanceSlots}, true},
		{"a new node to fill", Input{Owners: owners, Nodes: nodes(Node{ID: "e", Weight: 1, State: StateActive}), BalanceBy: BalanceSlots}, false},
		{"even load", Input{Owners: owners, Nodes: nodes(), Loads: even}, true},
		{"a down node's slots blocked", Input{Owners: owners, Nodes: down, Loads: even}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compute(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if p.Balanced != tc.want {
				t.Fatalf("Balanced = %v, want %v (%d moves, note %q, %d blocked)", p.Balanced, tc.want, len(p.Moves), p.Note, len(p.Blocked))
			}
		})
	}
}
