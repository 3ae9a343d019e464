// Package planner computes rebalance plans: the ordered list of single-slot
// moves that takes the current slot table to the one the desired node set
// calls for.
//
// A plan is a pure function of its Input (no clock, no randomness): the same
// table, nodes and sizes always give the same moves in the same order and the
// same plan id. The rules:
//
//   - Targets are proportional to weight over the active nodes, rounded by
//     largest remainder (ties to the node holding more now, then the smaller
//     id), so every target differs
//     from the exact share by less than one slot. Draining and down nodes
//     target zero; new nodes (owning nothing yet) are filled.
//   - The number of moves is the minimum: the sum over nodes of
//     max(0, current-target). Only donors give, only recipients take.
//   - Among the slots a donor could give, the ones with fewer bytes go first
//     (ties: lower slot number), so the cheapest moves run first.
//   - Donors and recipients are interleaved: each step takes the donor and
//     the recipient with the most left to do, avoiding the previous step's
//     donor and recipient when another is left, so no node carries a long
//     run of consecutive moves.
//
// Usage:
//
//	p, err := planner.Compute(planner.Input{Version: v, Owners: owners, Nodes: nodes})
//	...
//	if err := planner.Check(p, current); err != nil { // the table moved on: re-plan
//		...
//	}
package planner
