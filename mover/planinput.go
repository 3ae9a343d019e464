package mover

import (
	"fmt"
	"slices"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// The planner adapter: the directory's table and a plan's node edits as
// the planner's input, and plans checked against the table.

// applyEdits returns the planner's node set: the directory's nodes with the
// edits applied in imagination. It refuses edits naming unknown nodes or
// adding known ones.
func applyEdits(snap *directory.Snapshot, e Edits) ([]planner.Node, error) {
	nodes := make([]planner.Node, 0, len(snap.Nodes)+len(e.Add))
	index := map[string]int{}
	for _, n := range snap.Nodes {
		index[n.ID] = len(nodes)
		nodes = append(nodes, planner.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone, State: string(n.State)})
	}
	for _, a := range e.Add {
		if a.ID == "" {
			return nil, fmt.Errorf("%w: a node to add has no id", ErrInvalid)
		}
		if i, ok := index[a.ID]; ok {
			// Already registered (a node registers itself when it starts):
			// planning to add it is planning to fill it.
			if a.Weight > 0 {
				nodes[i].Weight = a.Weight
			}
			continue
		}
		w := a.Weight
		if w == 0 {
			w = 1
		}
		index[a.ID] = len(nodes)
		nodes = append(nodes, planner.Node{ID: a.ID, Weight: w, Zone: a.Zone, State: planner.StateActive})
	}
	for _, id := range e.Drain {
		i, ok := index[id]
		if !ok {
			return nil, fmt.Errorf("%w: cannot drain %q: no such node", ErrNotFound, id)
		}
		if nodes[i].State != planner.StateDown { // a down node stays down: nothing copies from it
			nodes[i].State = planner.StateDraining
		}
	}
	for _, id := range sortedKeys(e.Weights) {
		i, ok := index[id]
		if !ok {
			return nil, fmt.Errorf("%w: cannot weight %q: no such node", ErrNotFound, id)
		}
		w := e.Weights[id]
		if w < 0 {
			return nil, fmt.Errorf("%w: weight %d for %s is negative", ErrInvalid, w, id)
		}
		if w == 0 {
			if nodes[i].State != planner.StateDown {
				nodes[i].State = planner.StateDraining
			}
			continue
		}
		nodes[i].Weight = w
	}
	return nodes, nil
}

func plannerInput(snap *directory.Snapshot, nodes []planner.Node) planner.Input {
	in := planner.Input{Version: snap.Version, Owners: snap.Owners(), Nodes: nodes}
	if len(snap.Moves) > 0 {
		busy := &slots.Set{}
		for _, m := range snap.Moves {
			busy.Add(m.Slot)
		}
		in.Busy = busy
	}
	return in
}

func toPlannerPlan(p *Plan) *planner.Plan {
	pp := &planner.Plan{ID: p.ID, BaseVersion: p.BaseVersion}
	for _, m := range p.Moves {
		if m.Status == MovePending {
			pp.Moves = append(pp.Moves, planner.Move{Slot: m.Slot, From: m.From, To: m.To, Bytes: m.Bytes})
		}
	}
	return pp
}

// checkRemaining checks the pending moves of p against the table: a move
// whose target already owns its slot is fine (it will be skipped).
func checkRemaining(p *Plan, snap *directory.Snapshot) error {
	nodes := make([]planner.Node, 0, len(snap.Nodes))
	for _, n := range snap.Nodes {
		nodes = append(nodes, planner.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone, State: string(n.State)})
	}
	pp := toPlannerPlan(p)
	pp.Moves = slices.DeleteFunc(pp.Moves, func(m planner.Move) bool { return snap.Owner(slots.MustNew(m.Slot)) == m.To })
	in := plannerInput(snap, nodes)
	in.Busy = nil // the plan's own move in flight is not a conflict
	return planner.Check(pp, 0, in)
}

// afterMoves computes per-node before/after counts for an explicit list of
// moves (a truncated plan, a rollback, a single move).
func afterMoves(snap *directory.Snapshot, nodes []planner.Node, moves []PlannedMove, sizes []int64) []planner.NodeChange {
	counts := snap.Counts()
	var out []planner.NodeChange
	idx := map[string]int{}
	add := func(id, state string, weight int) {
		if _, ok := idx[id]; ok {
			return
		}
		idx[id] = len(out)
		out = append(out, planner.NodeChange{ID: id, State: state, Weight: weight, SlotsBefore: counts[id], SlotsAfter: counts[id]})
	}
	for _, n := range nodes {
		add(n.ID, n.State, n.Weight)
	}
	for _, n := range snap.Nodes {
		add(n.ID, string(n.State), n.Weight)
	}
	if sizes != nil {
		for s, o := range snap.Owners() {
			if i, ok := idx[o]; ok {
				out[i].BytesBefore += sizes[s]
				out[i].BytesAfter += sizes[s]
			}
		}
	}
	for _, m := range moves {
		add(m.From, "", 0)
		add(m.To, planner.StateActive, 1)
		out[idx[m.From]].SlotsAfter--
		out[idx[m.To]].SlotsAfter++
		out[idx[m.From]].BytesAfter -= m.Bytes
		out[idx[m.To]].BytesAfter += m.Bytes
	}
	pn := make([]planner.Node, len(out))
	cur := make([]int, len(out))
	for i, n := range out {
		pn[i], cur[i] = planner.Node{ID: n.ID, State: n.State, Weight: n.Weight}, n.SlotsBefore
	}
	for i, t := range planner.Targets(pn, cur) {
		out[i].TargetSlots = t
	}
	slices.SortFunc(out, func(a, b planner.NodeChange) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
