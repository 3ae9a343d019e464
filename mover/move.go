package mover

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// One move from begin to commit or abort: the state machine around the
// transfer protocol (transfer.go). Its phase lives in the directory; a
// retry, a restart of the copy or a new leader starts from what is
// recorded there, never from what this process remembers.

// maxCopyRestarts bounds how often a move's copy starts over because the
// source lost its change capture.
const maxCopyRestarts = 3

// storeEnd is one side of a move: a node and its Store client.
type storeEnd struct {
	id, addr string
	c        slotdv1.StoreClient
}

// runMove executes move i of plan p; g aborts it if the plan is stopped
// with abort requested. Moves of one window run it concurrently: what they
// share in p is written under the scheduler's recMu.
func (e *Executor) runMove(ctx context.Context, snap *directory.Snapshot, p *Plan, i int, g *planGuard) error {
	pm := p.Moves[i]
	slot, err := slots.New(pm.Slot)
	if err != nil {
		return e.pausePlan(ctx, p, fmt.Sprintf("move %d: %v", i, err))
	}
	if h := e.sched.takeHandoff(moveID(p.ID, i), e.term.Load()); h != nil {
		// Begun by this leader with its plan (onemove.go), as the
		// directory's transaction checked: driven as if begun here.
		defer h.stop()
		src, dst, err := e.endpoints(snap, pm.From, pm.To)
		if err != nil {
			return e.pausePlan(ctx, p, err.Error())
		}
		src.c = h.early
		if e.hook != nil {
			e.hook("begun", h.mv, g)
		}
		return e.drive(ctx, p, i, h.mv, src, dst, StepCopy, true, g)
	}
	skip, refuse := checkMove(snap, p, i, slot)
	if refuse != "" {
		// The watched table may lag etcd (a node the plan just registered,
		// say): decide on a fresh read before pausing anything.
		if snap, err = e.dir.Snapshot(ctx); err != nil {
			return err
		}
		if skip, refuse = checkMove(snap, p, i, slot); refuse != "" {
			return e.pausePlan(ctx, p, refuse)
		}
	}
	if skip {
		return e.skipped(ctx, p, i, slot, fmt.Sprintf("slot %d was on %s already", pm.Slot, pm.To))
	}
	src, dst, err := e.endpoints(snap, pm.From, pm.To)
	if err != nil {
		return e.pausePlan(ctx, p, err.Error())
	}
	mv, inFlight := snap.Move(slot)
	step, fresh := StepCopy, false
	if inFlight {
		step = stepOf(mv.Phase)
		e.lg.Info("resuming move", "slot", pm.Slot, "move", mv.MoveID, "phase", mv.Phase)
	} else {
		id := moveID(p.ID, i)
		// The source starts its export while the begin is written
		// (earlyexport.go): the request is the one the transfer makes. Not
		// for a slot holding data that may have to wait for its donor's
		// gate (scheduler.go): its export would run beside the donor's
		// other copy, and a move that long gains nothing from it.
		early, stopEarly := src.c, func() {}
		exportEarly := !e.sched.isData(copyKey{p.ID, i}) || e.cfg.Parallelism == 1 || len(p.Moves) == 1
		if exportEarly {
			early, stopEarly = startEarlyExport(ctx, src.c, &slotdv1.ExportRequest{Slot: uint32(slot.Int()), MoveId: id, RateBytesPerSecond: wireRate(e.rate(ctx))})
		}
		defer stopEarly()
		begun, done, err := e.begin(ctx, p, i, slot, id, g)
		if begun == nil || done {
			if exportEarly {
				// Not begun: the capture the early export started is
				// nobody's.
				e.retireEarly(ctx, early, src.addr, slot, id)
			}
			if begun == nil {
				return err
			}
			return nil
		}
		src.c = early
		mv, fresh = *begun, true
		if e.hook != nil {
			e.hook("begun", mv, g)
		}
	}
	return e.drive(ctx, p, i, mv, src, dst, step, fresh, g)
}

// checkMove decides move i of p on a table: skip it (its target owns the
// slot already), refuse it (a reason to pause), or go ahead.
func checkMove(snap *directory.Snapshot, p *Plan, i int, slot slots.Slot) (skip bool, refuse string) {
	pm := p.Moves[i]
	owner := snap.Owner(slot)
	mv, inFlight := snap.Move(slot)
	switch {
	case inFlight && (mv.PlanID != p.ID || mv.Index != i):
		return false, fmt.Sprintf("slot %d has another move in flight (%s); wait for it and resume", pm.Slot, mv.MoveID)
	case !inFlight && owner == pm.To:
		return true, ""
	case !inFlight && owner != pm.From:
		return false, fmt.Sprintf("slot %d is owned by %s, not %s as planned; the table changed, cancel and plan again", pm.Slot, owner, pm.From)
	}
	if n, ok := snap.Node(pm.To); !inFlight && (!ok || n.State != directory.NodeActive) {
		state := "not registered"
		if ok {
			state = string(n.State)
		}
		return false, fmt.Sprintf("target %s of slot %d is %s; resume when it is active, or cancel", pm.To, pm.Slot, state)
	}
	return false, ""
}

// begin records move i of p in the directory as moveID. It returns nil
// with the error to report when the move cannot begin, and done when
// nothing is left to do (skipped, or the plan stopped meanwhile).
func (e *Executor) begin(ctx context.Context, p *Plan, i int, slot slots.Slot, id string, g *planGuard) (*directory.Move, bool, error) {
	pm := p.Moves[i]
	m, err := e.dir.BeginMove(ctx, directory.MoveSpec{
		Slot: slot, From: pm.From, To: pm.To, MoveID: id, PlanID: p.ID, Index: i, Reason: pm.Reason, By: "mover/" + e.cfg.Name,
	})
	if err == nil {
		return m, false, nil
	}
	if !errors.Is(err, directory.ErrPrecondition) && !errors.Is(err, directory.ErrNotFound) && !errors.Is(err, directory.ErrInvalid) {
		return nil, false, err // etcd away: the plan loop retries the step
	}
	// Paused or cancelled since the plan was read: its run key was gone
	// when the move was to begin. Stop starting moves of this window and
	// let the next step decide on the plan as it is then: an operator's
	// resume may have come since, and pausing the plan here would undo it.
	if errors.Is(err, directory.ErrPlanNotRunning) {
		g.halted.Store(true)
		return nil, true, nil
	}
	if running, rerr := e.dir.Running(ctx, p.ID); rerr == nil && !running {
		g.halted.Store(true)
		return nil, true, nil
	}
	// The watched table may lag etcd: decide on a fresh read.
	fresh, ferr := e.dir.Snapshot(ctx)
	if ferr != nil {
		return nil, false, ferr
	}
	if _, busy := fresh.Move(slot); !busy && fresh.Owner(slot) == pm.To {
		return nil, true, e.skipped(ctx, p, i, slot, fmt.Sprintf("slot %d was on %s already", pm.Slot, pm.To))
	}
	return nil, true, e.pausePlan(ctx, p, fmt.Sprintf("cannot begin move of slot %d: %v", pm.Slot, err))
}

// drive carries move i of p, recorded as mv, from step to its end: a
// commit, an abort when the plan is stopped with abort requested, or an
// abort as failed (which pauses the plan). A store or etcd that is away is
// retried with backoff for MoveRetryFor, from the phase the directory
// recorded; a commit whose answer was lost is done when a fresh read shows
// it; a source that lost its change capture before the fence gets the copy
// restarted as a new move.
func (e *Executor) drive(ctx context.Context, p *Plan, i int, mv directory.Move, src, dst storeEnd, step Step, fresh bool, g *planGuard) error {
	retry := e.backoff()
	var giveUp time.Time
	restarts := 0
	// mayBeFenced says an attempt got as far as fencing the source. The
	// directory does not record that (the commit does, see journal), so
	// an abort from here must unfence the source as if it were recorded.
	mayBeFenced := false
	for {
		moveCtx, cancelMove := context.WithCancel(ctx)
		var fencing atomic.Bool
		unguard := g.add(&fencing, cancelMove)
		// A one-move plan (`slotctl move`) is timed end to end, with no
		// window of moves fencing at once: it fences its source beside the
		// import of a small slot's only batch. A rebalance's moves keep the
		// shorter write pause.
		beside := len(p.Moves) == 1
		res, err := e.transferWith(moveCtx, mv, src, dst, step, fresh, beside, &fencing, g)
		unguard()
		stopped := moveCtx.Err() != nil
		cancelMove()
		if fencing.Load() {
			mayBeFenced = true
		}
		if err == nil {
			e.committed(mv, src, res)
			e.recordMove(p, i, MoveDone, "", res.Bytes)
			return nil
		}
		if ctx.Err() != nil {
			return nil // leadership lost: the next leader resumes from the recorded phase
		}
		if stopped {
			// Paused or cancelled with the move before the fence.
			status := MovePending
			if g.cancelled() {
				status = MoveAborted
			}
			if err := e.abort(ctx, fencedIf(mv, mayBeFenced), src, dst, "plan paused or cancelled", status); err != nil {
				return err
			}
			e.recordMove(p, i, status, "", 0)
			return nil
		}
		// What the directory recorded decides what a retry may do.
		snap, rerr := e.dir.Snapshot(ctx)
		if rerr == nil {
			cur, ok := snap.Move(mv.Slot)
			switch {
			case !ok && snap.Owner(mv.Slot) == mv.To:
				// The commit applied; its answer was lost. Its transaction
				// wrote the result.
				e.lg.Info("commit answer lost; the directory shows the move done", "slot", mv.Slot.Int(), "move", mv.MoveID)
				e.committed(mv, src, res)
				e.recordMove(p, i, MoveDone, "", res.Bytes)
				return nil
			case !ok || cur.MoveID != mv.MoveID:
				e.lg.Warn("move ended elsewhere", "slot", mv.Slot.Int(), "move", mv.MoveID, "err", err)
				e.recordMove(p, i, MovePending, "", 0)
				return nil
			}
			mv = cur
		}
		if errors.Is(err, ErrCaptureLost) && mv.Phase != directory.PhaseFenced && !mayBeFenced && restarts < maxCopyRestarts {
			restarts++
			e.lg.Warn("source lost the change capture; restarting the copy", "slot", mv.Slot.Int(), "move", mv.MoveID, "err", err)
			if aerr := e.abort(ctx, mv, src, dst, "capture lost; the copy restarts", MovePending); aerr != nil {
				return aerr
			}
			begun, done, berr := e.begin(ctx, p, i, mv.Slot, boundID(fmt.Sprintf("%s.r%d", moveID(p.ID, i), restarts)), g)
			if begun == nil || done {
				return berr
			}
			mv, step, fresh = *begun, StepCopy, true
			continue
		}
		if Retryable(err) || Retryable(rerr) {
			if giveUp.IsZero() {
				giveUp = time.Now().Add(e.cfg.MoveRetryFor)
			}
			if time.Now().Before(giveUp) {
				e.lg.Warn("move failed; resuming from its recorded phase", "slot", mv.Slot.Int(), "move", mv.MoveID, "phase", mv.Phase, "err", err)
				if !retry.Sleep(ctx) {
					return nil
				}
				step, fresh = stepOf(mv.Phase), false
				continue
			}
		}
		return e.fail(ctx, p, i, fencedIf(mv, mayBeFenced), src, dst, err)
	}
}

// fencedIf returns mv in PhaseFenced when the caller may have fenced its
// source: what abort must assume.
func fencedIf(mv directory.Move, fenced bool) directory.Move {
	if fenced {
		mv.Phase = directory.PhaseFenced
	}
	return mv
}

// fail aborts move i of p as failed and pauses the plan, saying why.
func (e *Executor) fail(ctx context.Context, p *Plan, i int, mv directory.Move, src, dst storeEnd, err error) error {
	pm := p.Moves[i]
	e.lg.Error("move failed; aborting and pausing the plan", "slot", pm.Slot, "move", mv.MoveID, "err", err)
	if aerr := e.abort(ctx, mv, src, dst, err.Error(), MoveFailed); aerr != nil {
		return aerr
	}
	e.recordMove(p, i, MoveFailed, err.Error(), 0)
	reason := fmt.Sprintf("move of slot %d (%s -> %s) failed and was aborted: %v; fix it and slotctl resume, or cancel", pm.Slot, pm.From, pm.To, err)
	return e.pausePlan(ctx, p, reason)
}

func stepOf(ph directory.Phase) Step {
	switch ph {
	case directory.PhaseFenced:
		return StepFenced
	case directory.PhaseCatchup:
		return StepCatchUp
	}
	return StepCopy
}

// settle finishes or aborts a move that no applying plan owns (p is its
// plan, or nil).
func (e *Executor) settle(ctx context.Context, snap *directory.Snapshot, mv directory.Move, p *Plan) error {
	src, dst, err := e.endpoints(snap, mv.From, mv.To)
	if err != nil {
		return err
	}
	if mv.Phase == directory.PhaseFenced && (p == nil || !p.AbortCurrent || p.State == StateCancelled) {
		e.lg.Info("finishing fenced move left in flight", "slot", mv.Slot.Int(), "move", mv.MoveID, "plan", mv.PlanID)
		var fencing atomic.Bool
		res, err := e.transferWith(ctx, mv, src, dst, StepFenced, false, false, &fencing, nil)
		if err == nil {
			e.committed(mv, src, res)
			e.recordMove(p, mv.Index, MoveDone, "", res.Bytes)
			return nil
		}
		if Retryable(err) {
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
	if err := e.abort(ctx, mv, src, dst, reason, status); err != nil {
		return err
	}
	e.recordMove(p, mv.Index, status, "aborted: "+reason, 0)
	return nil
}

// endpoints returns the Store clients of a move's source and target.
func (e *Executor) endpoints(snap *directory.Snapshot, from, to string) (src, dst storeEnd, err error) {
	for _, x := range []struct {
		id  string
		end *storeEnd
	}{{from, &src}, {to, &dst}} {
		n, ok := snap.Node(x.id)
		if !ok {
			return src, dst, fmt.Errorf("%w: node %s is not registered", ErrPrecondition, x.id)
		}
		c, err := e.cfg.Stores.Client(n.Addr)
		if err != nil {
			return src, dst, err
		}
		*x.end = storeEnd{id: n.ID, addr: n.Addr, c: c}
	}
	return src, dst, nil
}

// transferWith runs the protocol for mv from step, journaling its phases
// in the directory and its progress in InFlight and the metrics.
func (e *Executor) transferWith(ctx context.Context, mv directory.Move, src, dst storeEnd, step Step, fresh, beside bool, fencing *atomic.Bool, g *planGuard) (Result, error) {
	prog := &MoveProgress{PlanID: mv.PlanID, MoveID: mv.MoveID, Slot: mv.Slot.Int(), From: mv.From, To: mv.To, Phase: string(mv.Phase), Started: time.Now()}
	e.mu.Lock()
	e.inflight[mv.MoveID] = prog
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.inflight, mv.MoveID)
		e.mu.Unlock()
	}()
	// A copy of a slot holding data waits for its donor (scheduler.go).
	copied := func() {}
	if step == StepCopy {
		release, err := e.sched.acquireCopy(ctx, mv)
		if err != nil {
			return Result{}, err
		}
		copied = release
	}
	defer copied()
	var fencedAt time.Time
	j := &journal{e: e, mv: mv, prog: prog, fencing: fencing}
	t := &Transfer{
		Slot: mv.Slot, MoveID: mv.MoveID, Source: src.c, Target: dst.c,
		Rate: e.rate(ctx), Journal: j, Verify: e.cfg.Verify, Fresh: fresh, FenceBeside: beside,
		Progress: func(b, k int) {
			e.mu.Lock()
			prog.Bytes += int64(b)
			prog.Keys += int64(k)
			e.mu.Unlock()
			e.m.bytesMoved.Add(float64(b))
			e.m.keysMoved.Add(float64(k))
		},
		Fenced: func() {
			fencedAt = time.Now()
			if e.hook != nil {
				e.hook("fenced", mv, g)
			}
		},
		Copied: copied,
	}
	res, err := t.Run(ctx, step)
	if err == nil {
		e.m.moveDuration.Observe(time.Since(prog.Started).Seconds())
		if !fencedAt.IsZero() {
			e.m.cutover.Observe(j.committedAt.Sub(fencedAt).Seconds())
		}
	}
	return res, err
}

// journal records a move's phases in the directory.
type journal struct {
	e           *Executor
	mv          directory.Move
	prog        *MoveProgress
	fencing     *atomic.Bool
	committedAt time.Time
}

func (j *journal) setPhase(p string) {
	j.e.mu.Lock()
	j.prog.Phase = p
	j.e.mu.Unlock()
}

func (j *journal) CatchingUp(ctx context.Context) error {
	j.setPhase(string(directory.PhaseCatchup))
	_, err := j.e.dir.AdvanceMove(ctx, j.mv.Slot, j.mv.MoveID, directory.PhaseCatchup)
	return err
}

// Fencing writes nothing: a fence is recorded by the commit that follows
// it (directory.CommitFencedMove), one transaction and one map version
// fewer per move. Until then only this process knows the source may be
// fenced: the guard no longer aborts the move, and drive's aborts unfence
// as for a recorded fence. A mover that dies in between leaves the move
// in its earlier phase; the next resumes it (fencing again is idempotent)
// or aborts it (Abort unfences first), and the source's reconciliation
// lifts a fence that no move in flight explains (guarantee 9).
func (j *journal) Fencing(ctx context.Context) error {
	j.fencing.Store(true)
	j.setPhase(string(directory.PhaseFenced))
	return nil
}

// Commit ends the move with the target as owner and records the fence;
// the same transaction stores the move's result with what res copied.
func (j *journal) Commit(ctx context.Context, res Result) (uint64, error) {
	v, err := j.e.dir.CommitFencedMove(ctx, j.mv.Slot, j.mv.MoveID, "mover/"+j.e.cfg.Name, directory.Copied{Bytes: res.Bytes, Keys: res.Keys})
	j.committedAt = time.Now()
	return v, err
}

// committed hands the source's clean-up to the cleaner and logs the move.
func (e *Executor) committed(mv directory.Move, src storeEnd, res Result) {
	e.m.moves.WithLabelValues("committed").Inc()
	e.lg.Info("slot moved", "slot", mv.Slot.Int(), "from", mv.From, "to", mv.To, "version", res.Version,
		"bytes", res.Bytes, "keys", res.Keys, "reason", mv.Reason, "plan", mv.PlanID)
	e.clean.add(cleanup{addr: src.addr, slot: mv.Slot, moveID: mv.MoveID})
	e.clean.add(cleanup{addr: src.addr, slot: mv.Slot, moveID: mv.MoveID, version: res.Version, drop: true})
}

// abort undoes a move before commit, ending it in the directory as status
// (pending: back to pending). A source that may be fenced must be unfenced
// first, so abort retries until it answers (or leadership ends):
// recording the abort while the source stays fenced would leave the slot
// without a writer.
func (e *Executor) abort(ctx context.Context, mv directory.Move, src, dst storeEnd, reason string, status MoveStatus) error {
	cur, err := e.dir.Snapshot(ctx)
	if err != nil {
		return err
	}
	phase := mv.Phase // PhaseFenced when the caller may have fenced the source
	if m, ok := cur.Move(mv.Slot); ok && m.MoveID == mv.MoveID {
		if phase != directory.PhaseFenced {
			phase = m.Phase
		}
	} else if !ok {
		return nil // already settled
	}
	b := e.backoff()
	for {
		targetErr, err := Abort(ctx, mv.Slot, mv.MoveID, src.c, dst.c)
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
