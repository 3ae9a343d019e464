// Package simplan is the rebalance that `slotctl simulate` passes to
// ringcompat.Simulate: the planner's minimum-move plan, applied to the slot
// table. It lives apart from both because the planner sits above ringcompat
// (ringcompat cannot import it), and slotctl and ringcompat's external tests
// must run the same one.
//
// Usage:
//
//	res, err := ringcompat.Simulate(ringcompat.SimConfig{..., Rebalance: simplan.Rebalance})
package simplan

import (
	"slices"

	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/ringcompat"
)

// Rebalance applies the planner's minimum-move plan for nodes (all active)
// to owners and returns the new table; owners is not modified. Slot sizes
// are not given to the planner, so the slots it picks do not depend on how
// many keys they hold: given sizes it would move the lightest slots and
// under-fill the new servers.
func Rebalance(owners []string, nodes []ringcompat.Node) ([]string, error) {
	in := planner.Input{Owners: owners}
	for _, n := range nodes {
		in.Nodes = append(in.Nodes, planner.Node{ID: n.ID, Weight: n.Weight, State: planner.StateActive})
	}
	p, err := planner.Compute(in)
	if err != nil {
		return nil, err
	}
	after := slices.Clone(owners)
	for _, m := range p.Moves {
		after[m.Slot] = m.To
	}
	return after, nil
}
