package mover

import (
	"context"
	"errors"
	"fmt"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// A one-move plan (`slotctl move`) made on the leading mover's own slotd
// is stored and begun by that leader in one directory transaction
// (directory.CreatePlanMove), planned on the table its watch holds, with
// the source's export started beside the transaction (earlyexport.go).
// The begun move is then handed to the plan loop, which drives it as if it
// had begun it itself. Compared with storing the plan for the executor to
// find: one transaction, the reads of the table's version and of the plan
// keys, and the plan watch's hop fewer.
//
// Recovery is unchanged: the plan record, its run key and the begun move
// are written together or not at all, so a leader that dies after the
// transaction leaves exactly what a leader that died right after its
// BeginMove leaves (a plan applying, move 0 in flight in phase copy), and
// the next one resumes it from there; one that dies before leaves nothing.
// A move handed over is only taken in the term that began it: a new term
// resumes it from the directory like any move in flight.

// errNotLeading: this process's mover does not lead (any more).
var errNotLeading = errors.New("mover: not the leader")

// handoff is a move its plan's leader began itself, waiting for the plan
// loop.
type handoff struct {
	term  uint64
	mv    directory.Move
	early slotdv1.StoreClient // the source, its export already open
	stop  func()              // ends the early export (idempotent)
}

// beginOneMove stores the one-move plan p (record data) and begins its
// move, in one transaction; snap is the table p was made on, through the
// revision through which the caller knows every plan record (the
// transaction refuses if any changed since). On success the plan loop
// takes the plan and its begun move without reading either. An error
// says nothing was written, unless it is an etcd error.
func (e *Executor) beginOneMove(ctx context.Context, p *Plan, data []byte, snap *directory.Snapshot, through int64) error {
	lctx := e.leadCtx.Load()
	if lctx == nil || !e.isLeader() {
		return errNotLeading
	}
	term := e.term.Load()
	pm := p.Moves[0]
	slot, err := slots.New(pm.Slot)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	src, _, err := e.endpoints(snap, pm.From, pm.To)
	if err != nil {
		return err
	}
	id := moveID(p.ID, 0)
	// Counted before the write: its watch event may come before the
	// answer.
	e.plans.beginPlan(p.ID)
	early, stop := startEarlyExport(*lctx, src.c, &slotdv1.ExportRequest{Slot: uint32(pm.Slot), MoveId: id, RateBytesPerSecond: wireRate(e.rate(ctx))})
	mv, err := e.dir.CreatePlanMove(ctx, directory.PlanMove{
		Spec: directory.MoveSpec{Slot: slot, From: pm.From, To: pm.To, MoveID: id, PlanID: p.ID, Index: 0,
			Reason: pm.Reason, By: "mover/" + e.cfg.Name, ExpectVersion: p.BaseVersion},
		Plan: data, PlansThrough: through,
	})
	if err != nil {
		e.retireEarly(ctx, early, src.addr, slot, id)
		// The write may have happened: the plan loop reads the plan.
		e.plans.notBegun(p.ID)
		e.notify()
		return err
	}
	e.plans.handOver(p, id, &handoff{term: term, mv: *mv, early: early, stop: stop})
	e.notify()
	return nil
}

// retireEarly ends early, the early export of move id that did not begin,
// and the capture it started on the source at addr, before a later move
// of the slot can start its own (earlyExport.retire); what it cannot end
// in order is left to the cleaner.
func (e *Executor) retireEarly(ctx context.Context, early slotdv1.StoreClient, addr string, slot slots.Slot, id string) {
	x := earlyOf(early)
	if x == nil {
		return
	}
	if err := x.retire(ctx, slot); err != nil {
		e.lg.Debug("early export not ended in order; leaving it to the cleaner", "node", addr, "slot", slot.Int(), "move", id, "err", err)
		e.clean.add(cleanup{addr: addr, slot: slot, moveID: id})
	}
}
