package planner

// The load view of a plan: each node's load and ratios before and after.

// countLoadView fills the load view (load and ratios before and after) of
// a slot-count plan p when nodes reported load, so that a count plan and a
// load plan can be compared on the same figures.
func countLoadView(in Input, nodes []Node, index map[string]int, p *Plan) {
	b, err := newBalancer(in, nodes, index, BalanceAuto)
	if err != nil {
		return // no active node with known load: nothing to show
	}
	before := make([]lnode, len(b.nodes))
	copy(before, b.nodes)
	for _, m := range p.Moves {
		b.move(m.Slot, index[m.To], "")
	}
	b.plan.Moves, b.plan.TotalBytes = nil, 0
	b.finish(before, b.total)
	for i := range p.Nodes {
		v := b.plan.Nodes[i]
		c := &p.Nodes[i]
		c.LoadKnown, c.LoadBefore, c.LoadAfter, c.RatioBefore, c.RatioAfter = v.LoadKnown, v.LoadBefore, v.LoadAfter, v.RatioBefore, v.RatioAfter
	}
	p.Unknown = b.plan.Unknown
}

// finish fills the per-node view and the estimate.
func (b *balancer) finish(before []lnode, beforeTotal vec) {
	// The view uses the full model (hot nodes included), so a hot node's
	// ratio reads as what it is; beside a hot spot, the other members'
	// ratios, before and after, are over the load and weight the hot nodes
	// leave them (what they can be balanced to).
	var w float64
	for _, n := range before {
		if n.member {
			w += n.weight
		}
	}
	ratio := func(load vec, n lnode, d int) float64 {
		if !n.member || beforeTotal[d] <= 0 || w == 0 {
			return 0
		}
		return round3(load[d] / (n.weight / w * beforeTotal[d]))
	}
	for i, n := range b.nodes {
		pb := before[i]
		nc := NodeChange{ID: n.id, State: n.state, Weight: int(n.weight),
			SlotsBefore: pb.slots, SlotsAfter: n.slots, BytesBefore: pb.bytes, BytesAfter: n.bytes,
			LoadKnown: n.known}
		if n.known {
			nc.LoadBefore, nc.LoadAfter = pb.load.load(), n.load.load()
			nc.RatioBefore = Load{Bytes: ratio(pb.load, pb, dimBytes), Ops: ratio(pb.load, pb, dimOps)}
			nc.RatioAfter = Load{Bytes: ratio(n.load, pb, dimBytes), Ops: ratio(n.load, pb, dimOps)}
			if n.member && !n.hot && len(b.plan.HotSpots) > 0 {
				// Beside a hot spot, the others share what the hot nodes
				// do not keep, before and after alike.
				nc.RatioAfter = Load{Bytes: round3(b.ratio(i, dimBytes)), Ops: round3(b.ratio(i, dimOps))}
				now := b.nodes[i].load
				b.nodes[i].load = pb.load
				nc.RatioBefore = Load{Bytes: round3(b.ratio(i, dimBytes)), Ops: round3(b.ratio(i, dimOps))}
				b.nodes[i].load = now
			}
		}
		b.plan.Nodes = append(b.plan.Nodes, nc)
	}
	b.plan.Estimate = Estimate(b.plan.TotalBytes, len(b.plan.Moves), b.in.Throttle, b.in.PerMove)
	b.plan.ID = planID(b.plan)
}
