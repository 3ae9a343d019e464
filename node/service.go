package node

import (
	"time"

	"context"
	"fmt"
	"math"

	"google.golang.org/grpc"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// storeServer serves the slotd.v1.Store migration protocol over a Node.
type storeServer struct {
	slotdv1.UnimplementedStoreServer
	n *Node
}

var _ slotdv1.StoreServer = (*storeServer)(nil)

// RegisterStore registers the node's slotd.v1.Store service (the migration
// protocol the mover calls) on a gRPC server. A server made with
// ServerOptions reads imports in place.
func (n *Node) RegisterStore(s grpc.ServiceRegistrar) {
	s.RegisterService(&storeServiceDesc, &storeServer{n: n})
}

func slotOf(n uint32) (slots.Slot, error) {
	s, err := slots.New(int(n))
	if err != nil {
		return s, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	return s, nil
}

func (x *storeServer) Export(req *slotdv1.ExportRequest, stream grpc.ServerStreamingServer[slotdv1.ExportBatch]) error {
	s, err := slotOf(req.GetSlot())
	if err != nil {
		return StatusError(err)
	}
	switch r := req.GetRateBytesPerSecond(); {
	case r == slotdv1.RateUnlimited:
		x.n.SetExportRate(0)
	case r > 0:
		x.n.SetExportRate(int64(min(r, math.MaxInt64)))
	}
	ctx := stream.Context()
	cursor := req.GetCursor()
	for {
		b, err := x.n.Export(ctx, s, req.GetMoveId(), cursor, int(req.GetMaxBatchBytes()))
		if err != nil {
			return StatusError(err)
		}
		out := &slotdv1.ExportBatch{Slot: req.GetSlot(), Cursor: b.Cursor, SnapshotSeq: b.SnapshotSeq, Done: b.Done}
		out.Entries = make([]*slotdv1.Entry, len(b.Entries))
		es := make([]slotdv1.Entry, len(b.Entries)) // one allocation, not one an entry
		for i, e := range b.Entries {
			es[i].Key, es[i].Value = e.Key, e.Value
			out.Entries[i] = &es[i]
		}
		if err := stream.Send(out); err != nil {
			return err
		}
		if b.Done {
			return nil
		}
		cursor = b.Cursor
	}
}

func (x *storeServer) SetExportRate(ctx context.Context, req *slotdv1.SetExportRateRequest) (*slotdv1.SetExportRateResponse, error) {
	x.n.SetExportRate(int64(req.GetBytesPerSecond()))
	return &slotdv1.SetExportRateResponse{BytesPerSecond: uint64(x.n.ExportRate())}, nil
}

func changeToProto(c Change) *slotdv1.Change {
	op := slotdv1.ChangeOp_CHANGE_OP_PUT
	if c.Delete {
		op = slotdv1.ChangeOp_CHANGE_OP_DELETE
	}
	return &slotdv1.Change{Seq: c.Seq, Op: op, Key: c.Key, Value: c.Value}
}

// Changes streams batches until caught up with what was captured when the
// call started (follow false) or until the slot is fenced and drained
// (follow true). The last batch always carries the fence sequence once there
// is one; a stream that had nothing to send sends one empty batch, so the
// caller always learns high_seq.
func (x *storeServer) Changes(req *slotdv1.ChangesRequest, stream grpc.ServerStreamingServer[slotdv1.ChangeBatch]) error {
	s, err := slotOf(req.GetSlot())
	if err != nil {
		return StatusError(err)
	}
	ctx := stream.Context()
	c, err := x.n.findCapture(s, req.GetMoveId())
	if err != nil {
		return StatusError(err)
	}
	highAtStart := c.last()
	after := req.GetAfterSeq()
	sent := false
	for {
		b, err := x.n.Changes(ctx, s, req.GetMoveId(), after, int(req.GetMaxBatchBytes()), false)
		if err != nil {
			return StatusError(err)
		}
		drained := b.FenceSeq != 0 && after+uint64(len(b.Changes)) >= b.FenceSeq
		caughtUp := !req.GetFollow() && after+uint64(len(b.Changes)) >= highAtStart
		if len(b.Changes) > 0 || ((drained || caughtUp) && !sent) || (drained && req.GetFollow()) {
			out := &slotdv1.ChangeBatch{Slot: req.GetSlot(), HighSeq: b.HighSeq, FenceSeq: b.FenceSeq}
			out.Changes = make([]*slotdv1.Change, len(b.Changes))
			for i, ch := range b.Changes {
				out.Changes[i] = changeToProto(ch)
			}
			if err := stream.Send(out); err != nil {
				return err
			}
			sent = true
		}
		if len(b.Changes) > 0 {
			after = b.Changes[len(b.Changes)-1].Seq
		}
		if drained || caughtUp {
			return nil
		}
		if len(b.Changes) == 0 {
			if err := c.wait(ctx, after); err != nil {
				return StatusError(err)
			}
		}
	}
}

func (x *storeServer) EndCapture(ctx context.Context, req *slotdv1.EndCaptureRequest) (*slotdv1.EndCaptureResponse, error) {
	s, err := slotOf(req.GetSlot())
	if err != nil {
		return nil, StatusError(err)
	}
	if err := x.n.EndCapture(ctx, s, req.GetMoveId()); err != nil {
		return nil, StatusError(err)
	}
	return &slotdv1.EndCaptureResponse{}, nil
}

func (x *storeServer) Import(ctx context.Context, req *slotdv1.ImportRequest) (*slotdv1.ImportResponse, error) {
	s, err := slotOf(req.GetSlot())
	if err != nil {
		return nil, StatusError(err)
	}
	var st ImportState
	var dup bool
	switch b := req.GetBatch().(type) {
	case *slotdv1.ImportRequest_Snapshot:
		sb := SnapshotBatch{
			BatchSeq: b.Snapshot.GetBatchSeq(), Cursor: b.Snapshot.GetCursor(),
			SnapshotSeq: b.Snapshot.GetSnapshotSeq(), Done: b.Snapshot.GetDone(),
			AfterPrevious: b.Snapshot.GetAfterPrevious(),
		}
		sb.Entries = make([]Entry, len(b.Snapshot.GetEntries()))
		for i, e := range b.Snapshot.GetEntries() {
			sb.Entries[i] = Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		st, dup, err = x.n.ImportSnapshot(ctx, s, req.GetMoveId(), sb)
	case *slotdv1.ImportRequest_Changes:
		changes := make([]Change, len(b.Changes.GetChanges()))
		for i, c := range b.Changes.GetChanges() {
			var del bool
			switch c.GetOp() {
			case slotdv1.ChangeOp_CHANGE_OP_PUT:
			case slotdv1.ChangeOp_CHANGE_OP_DELETE:
				del = true
			default:
				return nil, StatusError(fmt.Errorf("%w: change %d has no op", errBadRequest, c.GetSeq()))
			}
			changes[i] = Change{Seq: c.GetSeq(), Mutation: Mutation{Key: c.GetKey(), Value: c.GetValue(), Delete: del}}
		}
		st, dup, err = x.n.ImportChanges(ctx, s, req.GetMoveId(), changes)
		if r := req.GetRates(); err == nil && r != nil {
			x.n.seedRates(s, req.GetMoveId(), SlotRates{Reads1m: r.GetReads_1M(), Writes1m: r.GetWrites_1M(), Reads10m: r.GetReads_10M(), Writes10m: r.GetWrites_10M(), Measured: r.GetMeasuredSeconds()})
		}
	default:
		return nil, StatusError(fmt.Errorf("%w: import carries no batch", errBadRequest))
	}
	return importResponse(st, dup, err)
}

func importResponse(st ImportState, dup bool, err error) (*slotdv1.ImportResponse, error) {
	if err != nil {
		return nil, StatusError(err)
	}
	return &slotdv1.ImportResponse{LastBatchSeq: st.LastBatchSeq, LastChangeSeq: st.LastChangeSeq, Duplicate: dup, WaitsForPrevious: true}, nil
}

func (x *storeServer) ImportStatus(ctx context.Context, req *slotdv1.ImportStatusRequest) (*slotdv1.ImportStatusResponse, error) {
	s, err := slotOf(req.GetSlot())
	if err != nil {
		return nil, StatusError(err)
	}
	st := x.n.ImportStatus(s, req.GetMoveId())
	return &slotdv1.ImportStatusResponse{
		LastBatchSeq: st.LastBatchSeq, Cursor: st.Cursor, SnapshotSeq: st.SnapshotSeq,
		SnapshotDone: st.SnapshotDone, LastChangeSeq: st.LastChangeSeq,
	}, nil
}

func (x *storeServer) Fence(ctx context.Context, req *slotdv1.FenceRequest) (*slotdv1.FenceResponse, error) {
	s, err := slotOf(req.GetSlot())
	if err != nil {
		return nil, StatusError(err)
	}
	seq, err := x.n.Fence(ctx, s, req.GetMoveId(), req.GetVersion())
	if err != nil {
		return nil, StatusError(err)
	}
	return &slotdv1.FenceResponse{FenceSeq: seq, Rates: x.rates(s, x.n.cfg.Clock.Now())}, nil
}

// rates is slot s's request rates at now on the wire.
func (x *storeServer) rates(s slots.Slot, now time.Time) *slotdv1.SlotRates {
	r := x.n.slotRates(s, now)
	return &slotdv1.SlotRates{
		Reads_1M: r.Reads1m, Writes_1M: r.Writes1m, Reads_10M: r.Reads10m, Writes_10M: r.Writes10m, MeasuredSeconds: r.Measured,
	}
}

func (x *storeServer) Unfence(ctx context.Context, req *slotdv1.UnfenceRequest) (*slotdv1.UnfenceResponse, error) {
	s, err := slotOf(req.GetSlot())
	if err != nil {
		return nil, StatusError(err)
	}
	x.n.fenceMu.Lock()
	fi, fenced := x.n.fences[s]
	x.n.fenceMu.Unlock()
	if fenced && req.GetMoveId() != "" && fi.MoveID != "" && fi.MoveID != req.GetMoveId() {
		return nil, StatusError(fmt.Errorf("%w: slot %d is fenced by move %q, not %q", ErrMoveMismatch, s.Int(), fi.MoveID, req.GetMoveId()))
	}
	if err := x.n.Unfence(ctx, s); err != nil {
		return nil, StatusError(err)
	}
	return &slotdv1.UnfenceResponse{}, nil
}

func (x *storeServer) SlotStats(ctx context.Context, req *slotdv1.SlotStatsRequest) (*slotdv1.SlotStatsResponse, error) {
	resp := &slotdv1.SlotStatsResponse{NodeId: x.n.ID(), Version: x.n.MapVersion()}
	var stats []SlotStats
	if len(req.GetSlots()) == 0 {
		all, err := x.n.StatsAll(ctx)
		if err != nil {
			return nil, StatusError(err)
		}
		stats = all
	}
	for _, num := range req.GetSlots() {
		s, err := slotOf(num)
		if err != nil {
			return nil, StatusError(err)
		}
		st, err := x.n.Stats(ctx, s)
		if err != nil {
			return nil, StatusError(err)
		}
		stats = append(stats, st)
	}
	now := x.n.cfg.Clock.Now()
	for _, st := range stats {
		resp.Slots = append(resp.Slots, &slotdv1.SlotStat{
			Slot: uint32(st.Slot.Int()), Keys: uint64(st.Keys), Bytes: uint64(st.Bytes), WritesPerSecond: st.WritesPerSecond,
			Fenced: st.Fenced, Capturing: st.Capturing, Dropping: st.Dropping, Rates: x.rates(st.Slot, now),
		})
	}
	return resp, nil
}

func (x *storeServer) DropSlot(ctx context.Context, req *slotdv1.DropSlotRequest) (*slotdv1.DropSlotResponse, error) {
	s, err := slotOf(req.GetSlot())
	if err != nil {
		return nil, StatusError(err)
	}
	started, err := x.n.Drop(ctx, s, req.GetVersion(), int64(req.GetRateBytesPerSecond()), req.GetMoveId())
	if err != nil {
		return nil, StatusError(err)
	}
	return &slotdv1.DropSlotResponse{Started: started}, nil
}

func (x *storeServer) Checksum(ctx context.Context, req *slotdv1.ChecksumRequest) (*slotdv1.ChecksumResponse, error) {
	s, err := slotOf(req.GetSlot())
	if err != nil {
		return nil, StatusError(err)
	}
	sum, err := x.n.Checksum(ctx, s)
	if err != nil {
		return nil, StatusError(err)
	}
	return &slotdv1.ChecksumResponse{
		Slot: req.GetSlot(), Keys: uint64(sum.Keys), Bytes: uint64(sum.Bytes),
		Sha256: sum.SHA256[:], HighSeq: sum.HighSeq,
	}, nil
}
