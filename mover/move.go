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

// runningMove is one move being run: move i of plan p as the directory
// recorded it, its two ends, and where its next attempt starts. Its
// methods are the steps of a move: run takes a plan's move from its turn
// to its end (begin, then drive: transfer attempts until committed,
// aborted or failed); settle ends a move left in flight by no applying
// plan. One goroutine runs it; what it shares with the window (its plan's
// move statuses and state) is written under the planBook's recMu.
type runningMove struct {
	e *Executor
	p *Plan // nil: a move of no plan the executor holds, being settled
	i int   // the move's index in p
	// g aborts the move when its plan stops with abort requested; nil
	// when settling.
	g    *planGuard
	slot slots.Slot
	// mv is the move as the directory recorded it, once begun.
	mv       directory.Move
	src, dst storeEnd
	// step is where the next transfer starts; fresh says the move was
	// just begun, so the target holds nothing of it.
	step  transferStep
	fresh bool
	// beside fences the source beside the import of a copy of one small
	// batch. A one-move plan (`slotctl move`) is timed end to end, with
	// no window of moves fencing at once: it fences its source beside the
	// import of a small slot's only batch. A rebalance's moves keep the
	// shorter write pause.
	beside bool
	// mayBeFenced says an attempt got as far as fencing the source. The
	// directory does not record that (the commit does, see journal), so
	// an abort from here must unfence the source as if it were recorded.
	mayBeFenced bool
	restarts    int // copies started over because the capture was lost
}

// runMove runs move i of plan p; g aborts it if the plan is stopped with
// abort requested. Moves of one window run it concurrently.
func (e *Executor) runMove(ctx context.Context, snap *directory.Snapshot, p *Plan, i int, g *planGuard) error {
	m := &runningMove{e: e, p: p, i: i, g: g, step: stepCopy, beside: len(p.Moves) == 1}
	return m.run(ctx, snap)
}

// run takes the move from its turn to its end on table snap: skipped when
// its target owns the slot already, resumed from its recorded phase when
// in flight, else begun (the source's export started beside the begin),
// then driven.
func (m *runningMove) run(ctx context.Context, snap *directory.Snapshot) error {
	e, p, i := m.e, m.p, m.i
	pm := p.Moves[i]
	slot, err := slots.New(pm.Slot)
	if err != nil {
		return m.pause(ctx, fmt.Sprintf("move %d: %v", i, err))
	}
	m.slot = slot
	if h := e.plans.takeHandoff(moveID(p.ID, i), e.term.Load()); h != nil {
		// Begun by this leader with its plan (onemove.go), as the
		// directory's transaction checked: driven as if begun here.
		defer h.stop()
		if err := m.ends(snap); err != nil {
			return m.pause(ctx, err.Error())
		}
		m.src.c = h.early
		m.mv, m.fresh = h.mv, true
		m.begun()
		return m.drive(ctx)
	}
	skip, refuse := m.check(snap)
	if refuse != "" {
		// The watched table may lag etcd (a node the plan just registered,
		// say): decide on a fresh read before pausing anything.
		if snap, err = e.dir.Snapshot(ctx); err != nil {
			return err
		}
		if skip, refuse = m.check(snap); refuse != "" {
			return m.pause(ctx, refuse)
		}
	}
	if skip {
		return e.plans.skipped(ctx, p, i, slot, fmt.Sprintf("slot %d was on %s already", pm.Slot, pm.To))
	}
	if err := m.ends(snap); err != nil {
		return m.pause(ctx, err.Error())
	}
	if mv, inFlight := snap.Move(slot); inFlight {
		m.mv, m.step = mv, stepOf(mv.Phase)
		e.lg.Info("resuming move", "slot", pm.Slot, "move", mv.MoveID, "phase", mv.Phase)
		return m.drive(ctx)
	}
	id := moveID(p.ID, i)
	// The source starts its export while the begin is written
	// (earlyexport.go): the request is the one the transfer makes. Not
	// for a slot holding data that may have to wait for its donor's gate
	// (window.go): its export would run beside the donor's other copy,
	// and a move that long gains nothing from it.
	early, stopEarly := m.src.c, func() {}
	exportEarly := !e.gates.isData(copyKey{p.ID, i}) || e.cfg.Parallelism == 1 || len(p.Moves) == 1
	if exportEarly {
		early, stopEarly = startEarlyExport(ctx, m.src.c, &slotdv1.ExportRequest{Slot: uint32(slot.Int()), MoveId: id, RateBytesPerSecond: wireRate(e.rate(ctx))})
	}
	defer stopEarly()
	begun, err := m.begin(ctx, id)
	if !begun {
		if exportEarly {
			// Not begun: the capture the early export started is
			// nobody's.
			e.retireEarly(ctx, early, m.src.addr, slot, id)
		}
		return err
	}
	m.src.c = early
	m.begun()
	return m.drive(ctx)
}

// begun tells the scripted tests' hook that the move was just begun.
func (m *runningMove) begun() {
	if m.e.hook != nil {
		m.e.hook("begun", m.mv, m.g)
	}
}

// check decides the move on a table: skip it (its target owns the slot
// already), refuse it (a reason to pause), or go ahead.
func (m *runningMove) check(snap *directory.Snapshot) (skip bool, refuse string) {
	pm := m.p.Moves[m.i]
	owner := snap.Owner(m.slot)
	mv, inFlight := snap.Move(m.slot)
	switch {
	case inFlight && (mv.PlanID != m.p.ID || mv.Index != m.i):
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

// ends sets the move's source and target from table snap.
func (m *runningMove) ends(snap *directory.Snapshot) error {
	pm := m.p.Moves[m.i]
	var err error
	m.src, m.dst, err = m.e.endpoints(snap, pm.From, pm.To)
	return err
}

// begin records the move in the directory as id, to be copied from the
// start. It returns false, with the error to report, when the move did
// not begin: nothing is left to do (skipped, or the plan stopped
// meanwhile) when that error is nil.
func (m *runningMove) begin(ctx context.Context, id string) (bool, error) {
	e, p, pm := m.e, m.p, m.p.Moves[m.i]
	mv, err := e.dir.BeginMove(ctx, directory.MoveSpec{
		Slot: m.slot, From: pm.From, To: pm.To, MoveID: id, PlanID: p.ID, Index: m.i, Reason: pm.Reason, By: "mover/" + e.cfg.Name,
	})
	if err == nil {
		m.mv, m.step, m.fresh = *mv, stepCopy, true
		return true, nil
	}
	if !errors.Is(err, directory.ErrPrecondition) && !errors.Is(err, directory.ErrNotFound) && !errors.Is(err, directory.ErrInvalid) {
		return false, err // etcd away: the plan loop retries the step
	}
	// Paused or cancelled since the plan was read: its run key was gone
	// when the move was to begin. Stop starting moves of this window and
	// let the next step decide on the plan as it is then: an operator's
	// resume may have come since, and pausing the plan here would undo it.
	if errors.Is(err, directory.ErrPlanNotRunning) {
		m.g.halted.Store(true)
		return false, nil
	}
	if running, rerr := e.dir.Running(ctx, p.ID); rerr == nil && !running {
		m.g.halted.Store(true)
		return false, nil
	}
	// The watched table may lag etcd: decide on a fresh read.
	fresh, ferr := e.dir.Snapshot(ctx)
	if ferr != nil {
		return false, ferr
	}
	if _, busy := fresh.Move(m.slot); !busy && fresh.Owner(m.slot) == pm.To {
		return false, e.plans.skipped(ctx, p, m.i, m.slot, fmt.Sprintf("slot %d was on %s already", pm.Slot, pm.To))
	}
	return false, m.pause(ctx, fmt.Sprintf("cannot begin move of slot %d: %v", pm.Slot, err))
}

// drive carries the begun move from its step to its end: a commit, an
// abort when the plan is stopped with abort requested, or an abort as
// failed (which pauses the plan). A store or etcd that is away is retried
// with backoff for MoveRetryFor, from the phase the directory recorded; a
// commit whose answer was lost is done when a fresh read shows it; a
// source that lost its change capture before the fence gets the copy
// restarted as a new move.
func (m *runningMove) drive(ctx context.Context) error {
	e := m.e
	retry := e.backoff()
	var giveUp time.Time
	for {
		res, stopped, err := m.attempt(ctx)
		if err == nil {
			m.committed(res)
			return nil
		}
		if ctx.Err() != nil {
			return nil // leadership lost: the next leader resumes from the recorded phase
		}
		if stopped {
			// Paused or cancelled with the move before the fence.
			status := MovePending
			if m.g.cancelled() {
				status = MoveAborted
			}
			if err := m.abort(ctx, "plan paused or cancelled", status); err != nil {
				return err
			}
			m.record(status, "", 0)
			return nil
		}
		// What the directory recorded decides what a retry may do.
		snap, rerr := e.dir.Snapshot(ctx)
		if rerr == nil {
			cur, ok := snap.Move(m.mv.Slot)
			switch {
			case !ok && snap.Owner(m.mv.Slot) == m.mv.To:
				// The commit applied; its answer was lost. Its transaction
				// wrote the result.
				e.lg.Info("commit answer lost; the directory shows the move done", "slot", m.mv.Slot.Int(), "move", m.mv.MoveID)
				m.committed(res)
				return nil
			case !ok || cur.MoveID != m.mv.MoveID:
				e.lg.Warn("move ended elsewhere", "slot", m.mv.Slot.Int(), "move", m.mv.MoveID, "err", err)
				m.record(MovePending, "", 0)
				return nil
			}
			m.mv = cur
		}
		if errors.Is(err, ErrCaptureLost) && m.mv.Phase != directory.PhaseFenced && !m.mayBeFenced && m.restarts < maxCopyRestarts {
			m.restarts++
			e.lg.Warn("source lost the change capture; restarting the copy", "slot", m.mv.Slot.Int(), "move", m.mv.MoveID, "err", err)
			if aerr := m.abort(ctx, "capture lost; the copy restarts", MovePending); aerr != nil {
				return aerr
			}
			if begun, berr := m.begin(ctx, boundID(fmt.Sprintf("%s.r%d", moveID(m.p.ID, m.i), m.restarts))); !begun {
				return berr
			}
			continue
		}
		if retryable(err) || retryable(rerr) {
			if giveUp.IsZero() {
				giveUp = time.Now().Add(e.cfg.MoveRetryFor)
			}
			if time.Now().Before(giveUp) {
				e.lg.Warn("move failed; resuming from its recorded phase", "slot", m.mv.Slot.Int(), "move", m.mv.MoveID, "phase", m.mv.Phase, "err", err)
				if !retry.Sleep(ctx) {
					return nil
				}
				m.step, m.fresh = stepOf(m.mv.Phase), false
				continue
			}
		}
		return m.fail(ctx, err)
	}
}

// attempt runs the transfer once from m.step, guarded: the plan's guard
// cancels it, until it fences, when the plan stops with abort requested.
// stopped says it was cancelled so.
func (m *runningMove) attempt(ctx context.Context) (res transferResult, stopped bool, err error) {
	moveCtx, cancelMove := context.WithCancel(ctx)
	var fencing atomic.Bool
	unguard := m.g.add(&fencing, cancelMove)
	res, err = m.transfer(moveCtx, &fencing)
	unguard()
	stopped = moveCtx.Err() != nil
	cancelMove()
	if fencing.Load() {
		m.mayBeFenced = true
	}
	return res, stopped, err
}

// fail aborts the move as failed and pauses the plan, saying why.
func (m *runningMove) fail(ctx context.Context, err error) error {
	pm := m.p.Moves[m.i]
	m.e.lg.Error("move failed; aborting and pausing the plan", "slot", pm.Slot, "move", m.mv.MoveID, "err", err)
	if aerr := m.abort(ctx, err.Error(), MoveFailed); aerr != nil {
		return aerr
	}
	m.record(MoveFailed, err.Error(), 0)
	reason := fmt.Sprintf("move of slot %d (%s -> %s) failed and was aborted: %v; fix it and slotctl resume, or cancel", pm.Slot, pm.From, pm.To, err)
	return m.pause(ctx, reason)
}

// record notes the move's result in its cached plan.
func (m *runningMove) record(st MoveStatus, msg string, copied int64) {
	m.e.plans.record(m.p, m.i, st, msg, copied)
}

// pause pauses the move's plan on its own, saying why.
func (m *runningMove) pause(ctx context.Context, reason string) error {
	return m.e.plans.pause(ctx, m.p, reason)
}

func stepOf(ph directory.Phase) transferStep {
	switch ph {
	case directory.PhaseFenced:
		return stepFenced
	case directory.PhaseCatchup:
		return stepCatchUp
	}
	return stepCopy
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
		c, err := e.cfg.Stores.client(n.Addr)
		if err != nil {
			return src, dst, err
		}
		*x.end = storeEnd{id: n.ID, addr: n.Addr, c: c}
	}
	return src, dst, nil
}

// transfer runs the protocol for the move from m.step, journaling its
// phases in the directory and its progress in InFlight and the metrics;
// fencing is set once the source may be fenced.
func (m *runningMove) transfer(ctx context.Context, fencing *atomic.Bool) (transferResult, error) {
	e, mv := m.e, m.mv
	prog := &MoveProgress{PlanID: mv.PlanID, MoveID: mv.MoveID, Slot: mv.Slot.Int(), From: mv.From, To: mv.To, Phase: string(mv.Phase), Started: time.Now()}
	e.mu.Lock()
	e.inflight[mv.MoveID] = prog
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.inflight, mv.MoveID)
		e.mu.Unlock()
	}()
	// A copy of a slot holding data waits for its donor (window.go).
	copied := func() {}
	if m.step == stepCopy {
		release, err := e.gates.acquire(ctx, mv)
		if err != nil {
			return transferResult{}, err
		}
		copied = release
	}
	defer copied()
	var fencedAt time.Time
	j := &moveJournal{e: e, mv: mv, prog: prog, fencing: fencing}
	t := &slotTransfer{
		Slot: mv.Slot, MoveID: mv.MoveID, Source: m.src.c, Target: m.dst.c,
		Rate: e.rate(ctx), Journal: j, Verify: e.cfg.Verify, Fresh: m.fresh, FenceBeside: m.beside,
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
				e.hook("fenced", mv, m.g)
			}
		},
		Copied: copied,
	}
	res, err := t.Run(ctx, m.step)
	if err == nil {
		e.m.moveDuration.Observe(time.Since(prog.Started).Seconds())
		if !fencedAt.IsZero() {
			e.m.cutover.Observe(j.committedAt.Sub(fencedAt).Seconds())
		}
	}
	return res, err
}

// moveJournal records a move's phases in the directory.
type moveJournal struct {
	e           *Executor
	mv          directory.Move
	prog        *MoveProgress
	fencing     *atomic.Bool
	committedAt time.Time
}

func (j *moveJournal) setPhase(p string) {
	j.e.mu.Lock()
	j.prog.Phase = p
	j.e.mu.Unlock()
}

func (j *moveJournal) CatchingUp(ctx context.Context) error {
	j.setPhase(string(directory.PhaseCatchup))
	_, err := j.e.dir.AdvanceMove(ctx, j.mv.Slot, j.mv.MoveID, directory.PhaseCatchup)
	return err
}

// Fencing writes nothing: a fence is recorded by the commit that follows
// it (directory.CommitFencedMove), one transaction and one map version
// fewer per move. Until then only this process knows the source may be
// fenced: the guard no longer aborts the move, and its aborts unfence as
// for a recorded fence. A mover that dies in between leaves the move in
// its earlier phase; the next resumes it (fencing again is idempotent) or
// aborts it (abortOnStores unfences first), and the source's reconciliation lifts
// a fence that no move in flight explains.
func (j *moveJournal) Fencing(ctx context.Context) error {
	j.fencing.Store(true)
	j.setPhase(string(directory.PhaseFenced))
	return nil
}

// Commit ends the move with the target as owner and records the fence;
// the same transaction stores the move's result with what res copied.
func (j *moveJournal) Commit(ctx context.Context, res transferResult) (uint64, error) {
	v, err := j.e.dir.CommitFencedMove(ctx, j.mv.Slot, j.mv.MoveID, "mover/"+j.e.cfg.Name, directory.Copied{Bytes: res.Bytes, Keys: res.Keys})
	j.committedAt = time.Now()
	return v, err
}

// committed records the committed move in its plan, hands the source's
// clean-up to the cleaner and logs the move.
func (m *runningMove) committed(res transferResult) {
	e, mv := m.e, m.mv
	e.m.moves.WithLabelValues("committed").Inc()
	e.lg.Info("slot moved", "slot", mv.Slot.Int(), "from", mv.From, "to", mv.To, "version", res.Version,
		"bytes", res.Bytes, "keys", res.Keys, "reason", mv.Reason, "plan", mv.PlanID)
	e.clean.add(cleanup{addr: m.src.addr, slot: mv.Slot, moveID: mv.MoveID})
	e.clean.add(cleanup{addr: m.src.addr, slot: mv.Slot, moveID: mv.MoveID, version: res.Version, drop: true})
	m.record(MoveDone, "", res.Bytes)
}
