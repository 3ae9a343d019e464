package load

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/mover/planner"
)

// Proto is the view as the Load.Get RPC answers it.
func (v View) Proto() *slotdv1.GetLoadResponse {
	out := &slotdv1.GetLoadResponse{Now: timestamppb.New(v.At), Tolerance: v.Tolerance}
	for _, n := range v.Nodes {
		pn := &slotdv1.NodeLoadInfo{NodeId: n.ID, Known: n.Known, Weight: n.Weight, State: n.State}
		if n.Known {
			pn.Reported, pn.Version = timestamppb.New(n.Received), n.Version
			pn.Keys, pn.Bytes = n.Keys, n.Bytes
			pn.Reads_1M, pn.Writes_1M, pn.Reads_10M, pn.Writes_10M = n.Reads1m, n.Writes1m, n.Reads10m, n.Writes10m
			pn.FairKeys, pn.FairBytes, pn.FairOps = n.FairKeys, n.FairBytes, n.FairOps
		}
		for _, s := range n.Slots {
			pn.Slots = append(pn.Slots, slotProto(s))
		}
		for _, k := range n.HotKeys {
			pn.HotKeys = append(pn.HotKeys, &slotdv1.HotKey{Key: []byte(k.Key), Slot: uint32(k.Slot), Rate: k.Rate, Error: k.Err, Truncated: k.Truncated})
		}
		out.Nodes = append(out.Nodes, pn)
	}
	for _, h := range v.HotSpots {
		out.HotSpots = append(out.HotSpots, &slotdv1.HotSpot{Slot: uint32(h.Slot), NodeId: h.Node, Dimension: h.Dimension, Share: h.Share, Tag: h.Tag})
	}
	return out
}

// slotProto is a slot's load on the wire.
func slotProto(s planner.SlotLoad) *slotdv1.SlotLoad {
	return &slotdv1.SlotLoad{Slot: uint32(s.Slot), Keys: uint64(s.Keys), Bytes: uint64(s.Bytes),
		Reads_1M: s.Reads1m, Writes_1M: s.Writes1m, Reads_10M: s.Reads, Writes_10M: s.Writes, Tag: s.Tag}
}

// ViewFromProto is the inverse of View.Proto, for clients (slotctl).
func ViewFromProto(pb *slotdv1.GetLoadResponse) View {
	v := View{At: pb.GetNow().AsTime(), Tolerance: pb.GetTolerance()}
	for _, pn := range pb.GetNodes() {
		n := NodeView{
			ID: pn.GetNodeId(), Weight: pn.GetWeight(), State: pn.GetState(), Known: pn.GetKnown(), Version: pn.GetVersion(),
			Keys: pn.GetKeys(), Bytes: pn.GetBytes(),
			Reads1m: pn.GetReads_1M(), Writes1m: pn.GetWrites_1M(), Reads10m: pn.GetReads_10M(), Writes10m: pn.GetWrites_10M(),
			FairKeys: pn.GetFairKeys(), FairBytes: pn.GetFairBytes(), FairOps: pn.GetFairOps(),
		}
		if pn.GetReported() != nil {
			n.Received = pn.GetReported().AsTime()
		}
		for _, s := range pn.GetSlots() {
			n.Slots = append(n.Slots, planner.SlotLoad{Slot: uint16(s.GetSlot()), Keys: float64(s.GetKeys()), Bytes: float64(s.GetBytes()),
				Reads1m: s.GetReads_1M(), Writes1m: s.GetWrites_1M(), Reads: s.GetReads_10M(), Writes: s.GetWrites_10M(), Tag: s.GetTag()})
		}
		for _, k := range pn.GetHotKeys() {
			n.HotKeys = append(n.HotKeys, planner.HotKey{Key: string(k.GetKey()), Slot: uint16(k.GetSlot()), Rate: k.GetRate(), Err: k.GetError(), Truncated: k.GetTruncated()})
		}
		v.Nodes = append(v.Nodes, n)
	}
	for _, h := range pb.GetHotSpots() {
		v.HotSpots = append(v.HotSpots, HotSpot{Slot: uint16(h.GetSlot()), Node: h.GetNodeId(), Dimension: h.GetDimension(), Share: h.GetShare(), Tag: h.GetTag()})
	}
	return v
}
