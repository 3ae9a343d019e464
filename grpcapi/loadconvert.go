package grpcapi

import (
	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/mover/planner"
)

// loadProto adds what a plan says about measured load to its proto: the
// mode and band, the note, unknown nodes, hot spots, blocked slots, and each
// node's load and ratios before and after.
func loadProto(p *mover.Plan, out *slotdv1.Plan) {
	out.BalanceBy = string(p.BalanceBy)
	out.Tolerance = p.Tolerance
	out.Note = p.Note
	out.UnknownNodes = p.Unknown
	for _, h := range p.HotSpots {
		out.HotSpots = append(out.HotSpots, &slotdv1.HotSpot{Slot: uint32(h.Slot), NodeId: h.Node, Dimension: h.Dimension, Share: h.Share, Tag: h.Tag})
	}
	for _, b := range p.Blocked {
		out.Blocked = append(out.Blocked, &slotdv1.BlockedSlots{NodeId: b.Node, Slots: b.Slots, Count: uint32(max(b.Count, 0)), Reason: b.Reason})
	}
	for i, n := range p.Nodes {
		if i >= len(out.Nodes) || !n.LoadKnown {
			continue
		}
		nb := out.Nodes[i]
		nb.LoadKnown = true
		nb.LoadBefore = &slotdv1.NodeLoadView{Bytes: n.LoadBefore.Bytes, Ops: n.LoadBefore.Ops, BytesRatio: n.RatioBefore.Bytes, OpsRatio: n.RatioBefore.Ops}
		nb.LoadAfter = &slotdv1.NodeLoadView{Bytes: n.LoadAfter.Bytes, Ops: n.LoadAfter.Ops, BytesRatio: n.RatioAfter.Bytes, OpsRatio: n.RatioAfter.Ops}
	}
}

// loadFromProto reads the same back (a plan file).
func loadFromProto(pb *slotdv1.Plan, p *mover.Plan) {
	p.BalanceBy = planner.BalanceBy(pb.GetBalanceBy())
	p.Tolerance = pb.GetTolerance()
	p.Note = pb.GetNote()
	p.Unknown = pb.GetUnknownNodes()
	for _, h := range pb.GetHotSpots() {
		p.HotSpots = append(p.HotSpots, planner.HotSpot{Slot: int(h.GetSlot()), Node: h.GetNodeId(), Dimension: h.GetDimension(), Share: h.GetShare(), Tag: h.GetTag()})
	}
	for _, b := range pb.GetBlocked() {
		p.Blocked = append(p.Blocked, planner.Blocked{Node: b.GetNodeId(), Slots: b.GetSlots(), Count: int(b.GetCount()), Reason: b.GetReason()})
	}
	for i, n := range pb.GetNodes() {
		if i >= len(p.Nodes) || !n.GetLoadKnown() {
			continue
		}
		b, a := n.GetLoadBefore(), n.GetLoadAfter()
		c := &p.Nodes[i]
		c.LoadKnown = true
		c.LoadBefore, c.RatioBefore = planner.Load{Bytes: b.GetBytes(), Ops: b.GetOps()}, planner.Load{Bytes: b.GetBytesRatio(), Ops: b.GetOpsRatio()}
		c.LoadAfter, c.RatioAfter = planner.Load{Bytes: a.GetBytes(), Ops: a.GetOps()}, planner.Load{Bytes: a.GetBytesRatio(), Ops: a.GetOpsRatio()}
	}
}
