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
// What a plan balances is Input.BalanceBy: slots (the rules above), or
// measured load from the nodes' reports (Input.Loads):
//
//   - A node's fair share of a dimension is its weight over the weight of
//     the active nodes with known load (a node that reported, or owns
//     nothing); its ratio is its load over its share of the total. 1.0 is
//     exactly its share.
//   - bytes balances the bytes held, ops the requests per second (reads +
//     writes). auto (the default) balances both: a node is inside the band
//     only when both its bytes and its ops ratios are; the plan first
//     reduces the bytes imbalance (every move checked in ops too), then
//     both. A move may not take the recipient's bytes and ops ratios
//     further apart than half the band: a slot moves at most once a plan,
//     so a node filled first with big, quiet slots could never trade them
//     for the busy ones its ops still need (nor the other way round).
//     With no load for any node that owns slots (a node owning nothing
//     measures nothing), auto balances slot counts and says so, while
//     bytes and ops are refused (ErrNoLoad); with loads that hold no data
//     and see no traffic (a new cluster), auto balances slot counts too
//     ("no data or traffic measured yet"). The mover gives the planner each
//     store's slot sizes as answered when the plan is made, over the
//     reports' (mover/measure.go).
//   - Dead band: no plan while every node is within Tolerance (10%) of its
//     share ("balanced within 10%: nothing to do"); once one is not, the
//     plan aims at half the band so the next report does not find it at the
//     edge. The imbalance is the sum over nodes and balanced dimensions of
//     the squared distance of each ratio outside that aim.
//   - Draining nodes empty first, each slot, heaviest first, to the node
//     where it adds the least imbalance.
//   - Then, one move at a time, the move of the largest imbalance reduction
//     per byte copied, with a fixed cost per move of max(4 KiB, the mean
//     slot size); a swap of two slots when no single move helps. A move is
//     allowed only if the recipient ends, in every balanced dimension, at or
//     below the larger of the band's top and the donor's new ratio: no move
//     makes the most loaded node worse. A slot moves at most once per plan.
//   - Churn budget: MaxBytes and MaxMoves stop the plan, drains included
//     ("stopped at the budget"); in every mode a plan cut by the budget is
//     its first moves that fit.
//   - Unknown nodes (active, no report) neither give nor take; the plan
//     names them. Down nodes never give (a move copies from its source):
//     their slots are listed as Blocked, in every mode.
//   - Hot spots: a slot whose load alone exceeds the band of the largest
//     node stays; its node keeps only it (its other loaded slots leave) and
//     takes nothing; the plan names slot, node, dimension, share and the hash
//     tag its hot keys share. The others are balanced over what is left.
//   - Every move carries a reason in words.
//
// # Replica plans
//
// ComputeReplicas plans replica sets (docs/replication.md): each slot's
// primary, in-sync replicas and learners, under a policy of rf (1-5) and
// min_isr. A plan is ordered single-slot steps: add-learner, join-isr,
// transfer-primary, remove-replica; moving a replica is add, join, transfer
// if it is the primary, remove. It is as pure as Compute. Goals, in strict
// order:
//
//  1. Zone veto (rf > 1): no step adds a replica to a zone that holds one
//     of the slot, so every intermediate set keeps the rule; the primary is
//     never removed and no step leaves fewer than min_isr in sync.
//  2. Replica count: min(rf, zones with an active node) live replicas per
//     slot. A lost zone (its nodes down) leaves its slots under-replicated,
//     listed with the reason; nothing doubles up elsewhere. Lowering rf
//     removes replicas, raising it adds learners in zones the slot lacks.
//  3. Replica balance by weight over active nodes: zone targets capped at
//     one replica per slot (a lone node in one of rf zones holds every
//     slot), each shared among its nodes. Draining and down nodes target
//     zero: their replicas move, replaced in their own zone or one the slot
//     lacks; a draining primary hands over first, which copies nothing.
//  4. Primary balance by weight, by transfer only.
//  5. Requests, from the primaries' load reports: primaries swapped
//     between nodes that hold both slots, counts unchanged; a slot whose
//     requests alone exceed its node's band stays and is named.
//
// A node or zone within 1% (one replica at least) of its target is left
// alone, so a fresh bootstrap (ringcompat.InitialReplicas) plans nothing.
// A slot whose primary is down, or with a step in flight, gets no step. A
// replica that cannot leave a draining node without breaking the zone
// rule or min_isr (min_isr = rf forbids replacing one inside its zone)
// stays, and the plan lists it as blocked. At rf 1 the zone veto is off: a
// slot has one replica and moves within a zone as it does today.
//
// Usage:
//
//	p, err := planner.Compute(planner.Input{Version: v, Owners: owners, Nodes: nodes})
//	...
//	if err := planner.Check(p, current); err != nil { // the table moved on: re-plan
//		...
//	}
//	rp, err := planner.ComputeReplicas(planner.ReplicaInput{Sets: sets, Nodes: nodes, RF: 3, MinISR: 2})
package planner
