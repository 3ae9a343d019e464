package mover

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// The undoing of a move that did not commit: its abort (the stores', then
// the directory's), and the settling of a move left in flight by no
// applying plan, finished if fenced, else aborted.

// abort undoes the move before commit, ending it in the directory as
// status (pending: back to pending). A source that may be fenced must be
// unfenced first, so abort retries until it answers (or leadership
// ends): recording the abort while the source stays fenced would leave
// the slot without a writer.
func (m *runningMove) abort(ctx context.Context, reason string, status MoveStatus) error {
	e, src, dst := m.e, m.src, m.dst
	mv := m.mv
	if m.mayBeFenced {
		mv.Phase = directory.PhaseFenced // what abort must assume
	}
	cur, err := e.dir.Snapshot(ctx)
	if err != nil {
		return err
	}
	phase := mv.Phase // PhaseFenced when an attempt may have fenced the source
	if cm, ok := cur.Move(mv.Slot); ok && cm.MoveID == mv.MoveID {
		if phase != directory.PhaseFenced {
			phase = cm.Phase
		}
	} else if !ok {
		return nil // already settled
	}
	b := e.backoff()
	for {
		targetErr, err := abortOnStores(ctx, mv.Slot, mv.MoveID, src.c, dst.c)
		if err == nil {
			if targetErr != nil {
				e.clean.add(cleanup{addr: dst.addr, slot: mv.Slot, moveID: mv.MoveID, drop: true})
			}
			break
		}
		if phase != directory.PhaseFenced {
			// Never fenced: the source keeps serving; its capture is ended
			// later, and the target's copy dropped.
			e.clean.add(cleanup{addr: src.addr, slot: mv.Slot, moveID: mv.MoveID})
			e.clean.add(cleanup{addr: dst.addr, slot: mv.Slot, moveID: mv.MoveID, drop: true})
			break
		}
		e.lg.Warn("cannot unfence the source yet; retrying", "slot", mv.Slot.Int(), "node", src.id, "err", err)
		if !b.Sleep(ctx) {
			return ctx.Err()
		}
	}
	if status == MovePending {
		status = "" // back to pending: no result
	}
	if _, err := e.dir.AbortMoveAs(ctx, mv.Slot, mv.MoveID, reason, "mover/"+e.cfg.Name, string(status)); err != nil && !errors.Is(err, directory.ErrNotFound) {
		return err
	}
	result := string(status)
	if result == "" {
		result = "aborted"
	}
	e.m.moves.WithLabelValues(result).Inc()
	e.lg.Warn("move aborted", "slot", mv.Slot.Int(), "from", mv.From, "to", mv.To, "move", mv.MoveID, "reason", reason)
	return nil
}

// abortOnStores undoes a move that did not commit: the source is unfenced and stops
// capturing, and the target drops its partial copy. The source must be
// reachable: a fenced source that cannot be unfenced would refuse writes
// forever, so the caller retries abortOnStores until it succeeds before it records
// the abort in the directory. The target's drop is best effort.
func abortOnStores(ctx context.Context, slot slots.Slot, moveID string, source, target slotdv1.StoreClient) (targetErr error, err error) {
	s := uint32(slot.Int())
	if _, err := source.Unfence(ctx, &slotdv1.UnfenceRequest{Slot: s, MoveId: moveID}); err != nil {
		return nil, fmt.Errorf("unfence source: %w", err)
	}
	if _, err := source.EndCapture(ctx, &slotdv1.EndCaptureRequest{Slot: s, MoveId: moveID}); err != nil && status.Code(err) != codes.NotFound && status.Code(err) != codes.FailedPrecondition {
		return nil, fmt.Errorf("end capture on source: %w", err)
	}
	if _, err := target.DropSlot(ctx, &slotdv1.DropSlotRequest{Slot: s, MoveId: moveID}); err != nil {
		return fmt.Errorf("drop partial copy on target: %w", err), nil
	}
	return nil, nil
}

// leftInFlight returns move mv, in flight on table snap while no applying
// plan owns it (p is its plan, or nil), to settle.
func (e *Executor) leftInFlight(snap *directory.Snapshot, mv directory.Move, p *Plan) (*runningMove, error) {
	src, dst, err := e.endpoints(snap, mv.From, mv.To)
	if err != nil {
		return nil, err
	}
	return &runningMove{e: e, p: p, i: mv.Index, slot: mv.Slot, mv: mv, src: src, dst: dst, step: stepFenced}, nil
}

// settle finishes the move if fenced (unless its plan asked to abort it),
// else aborts it.
func (m *runningMove) settle(ctx context.Context) error {
	e, mv, p := m.e, m.mv, m.p
	if mv.Phase == directory.PhaseFenced && (p == nil || !p.AbortCurrent || p.State == StateCancelled) {
		e.lg.Info("finishing fenced move left in flight", "slot", mv.Slot.Int(), "move", mv.MoveID, "plan", mv.PlanID)
		var fencing atomic.Bool
		res, err := m.transfer(ctx, &fencing)
		if err == nil {
			m.committed(res)
			return nil
		}
		if retryable(err) {
			return err
		}
		e.lg.Warn("fenced move left in flight cannot finish; aborting", "slot", mv.Slot.Int(), "err", err)
	}
	reason := "plan " + mv.PlanID + " is not applying"
	if p == nil {
		reason = "move outside any applying plan"
	}
	status := MovePending
	if p != nil && p.State == StateCancelled {
		status = MoveAborted
	}
	if err := m.abort(ctx, reason, status); err != nil {
		return err
	}
	m.record(status, "aborted: "+reason, 0)
	return nil
}
