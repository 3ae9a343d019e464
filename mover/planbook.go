package mover

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// planBook is the executor's bookkeeping of plans: the plan records with
// their results as last read, the results of this leader's own moves
// added as they end (the directory has them already: each was written by
// the transaction that ended the move), the state changes the executor
// makes itself, and the one-move plans a leader began on its own
// (onemove.go) until the plan loop takes them.
type planBook struct {
	ctl *Control
	dir *directory.Directory
	lg  *slog.Logger
	m   *metrics

	// dirty says every plan record must be read again (at the start of a
	// term); stale names the ones changed since they were read, less the
	// executor's own writes (selfWrites counts those not yet seen).
	dirty      atomic.Bool
	staleMu    sync.Mutex // guards stale, selfWrites, created, handed, handoffs and beginning
	stale      map[string]bool
	selfWrites map[string]int
	// created holds the records of stale plans whose last write seen
	// created them: new plans, with no results to read unless they ran
	// already (refresh uses one only for a plan it does not hold).
	created map[string]directory.PlanRecord
	// handed are one-move plans this leader stored and begun itself
	// (onemove.go), for refresh to add; handoffs their begun moves, by
	// move id, for the move to take.
	handed   []*Plan
	handoffs map[string]*handoff
	// beginning are the plans whose transaction is in flight: the watched
	// table may show their move before they are handed over, and it is
	// no move to settle.
	beginning map[string]bool

	// recMu guards the plans' move statuses and states: the plan loop
	// reads them while moves in flight write them.
	recMu sync.Mutex
	plans []*Plan // owned by the plan loop goroutine
}

func newPlanBook(ctl *Control, dir *directory.Directory, lg *slog.Logger, m *metrics) *planBook {
	b := &planBook{ctl: ctl, dir: dir, lg: lg, m: m,
		stale: map[string]bool{}, selfWrites: map[string]int{}, created: map[string]directory.PlanRecord{},
		handoffs: map[string]*handoff{}, beginning: map[string]bool{}}
	b.dirty.Store(true)
	return b
}

// newTerm makes the next refresh read every plan record again.
func (b *planBook) newTerm() { b.dirty.Store(true) }

// planChanged notes a write of plan id. The executor's own writes are
// already in its cached records: re-reading a plan of thousands of moves
// after each of them would cost more than the moves.
func (e *Executor) planChanged(id string) {
	e.planWritten(directory.PlanEvent{ID: id})
}

// planWritten notes a write of a plan record seen by the watch. A record
// the write created is kept: the plan loop takes a new plan (`slotctl
// move` stores one applying) from it instead of reading it back, and
// Control.Active learns its state without a read.
func (e *Executor) planWritten(ev directory.PlanEvent) {
	e.ctl.learnRecord(ev)
	if ev.Start {
		return
	}
	if !e.plans.written(ev) {
		// The executor's own write wakes nobody: the plan loop made it,
		// and a guard woken by it would read the plan record back in the
		// middle of the move (every `slotctl move` did).
		e.notify()
	}
}

// written notes ev, a write of a plan record, and reports whether it was
// one of the executor's own.
func (b *planBook) written(ev directory.PlanEvent) (self bool) {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	delete(b.created, ev.ID)
	if b.selfWrites[ev.ID] > 0 {
		b.selfWrites[ev.ID]--
		return true
	}
	b.stale[ev.ID] = true
	if ev.Created && ev.Record != nil {
		b.created[ev.ID] = *ev.Record
	}
	return false
}

// refresh brings the cached plan records up to date: all of them at the
// start of a term, else only those written by someone else since.
func (b *planBook) refresh(ctx context.Context) error {
	if b.dirty.Swap(false) || b.plans == nil {
		b.staleMu.Lock()
		clear(b.stale)
		clear(b.selfWrites)
		clear(b.created)
		b.handed = nil
		b.staleMu.Unlock()
		b.dropHandoffs(nil) // the read finds them, begun
		plans, err := b.ctl.List(ctx)
		if err != nil {
			b.dirty.Store(true)
			return err
		}
		b.plans = plans
		return nil
	}
	b.plans = b.takeHanded(b.plans)
	b.staleMu.Lock()
	ids := make([]string, 0, len(b.stale))
	for id := range b.stale {
		ids = append(ids, id)
	}
	clear(b.stale)
	created := b.created
	b.created = map[string]directory.PlanRecord{}
	b.staleMu.Unlock()
	for k, id := range ids {
		var p *Plan
		var err error
		known := slices.ContainsFunc(b.plans, func(q *Plan) bool { return q.ID == id })
		if rec, ok := created[id]; ok && !known {
			// New since this term's first read, and not run since: no
			// result to merge. (A plan the term's read already held may
			// have run moves by the time its creation is seen: read it.)
			p, err = b.ctl.decode(id, rec.Data)
		} else {
			p, err = b.ctl.Get(ctx, id)
		}
		if errors.Is(err, ErrNotFound) {
			b.plans = slices.DeleteFunc(b.plans, func(q *Plan) bool { return q.ID == id })
			continue
		}
		if err != nil {
			// This plan and those not read yet are read next time.
			b.staleMu.Lock()
			for _, left := range ids[k:] {
				b.stale[left] = true
			}
			b.staleMu.Unlock()
			return err
		}
		if i := slices.IndexFunc(b.plans, func(q *Plan) bool { return q.ID == id }); i >= 0 {
			b.plans[i] = p
		} else {
			b.plans = append(b.plans, p)
			slices.SortStableFunc(b.plans, func(x, y *Plan) int { return x.Created.Compare(y.Created) })
		}
	}
	return nil
}

// progress returns p's counts, read under recMu.
func (b *planBook) progress(p *Plan) Progress {
	b.recMu.Lock()
	defer b.recMu.Unlock()
	return p.Progress()
}

// finish marks an applying plan with nothing left to run as done (its
// results are this leader's, read at the start of its term and kept since).
func (b *planBook) finish(ctx context.Context, p *Plan) error {
	err := b.setState(ctx, p, func(q *Plan) directory.Run {
		if q.State != StateApplying {
			return directory.RunKeep
		}
		q.State = StateDone
		return directory.RunStop
	})
	if err == nil {
		pr := p.Progress()
		b.lg.Info("plan done", "plan", p.ID, "moves", pr.Done, "skipped", pr.Skipped, "bytes_copied", pr.BytesCopied)
	}
	return err
}

// record notes move i's result in the cached plan p (nil: a move of no
// plan the executor holds).
func (b *planBook) record(p *Plan, i int, st MoveStatus, msg string, copied int64) {
	if p == nil || i < 0 || i >= len(p.Moves) {
		return
	}
	b.recMu.Lock()
	defer b.recMu.Unlock()
	m := &p.Moves[i]
	m.Status, m.Error, m.Copied, m.Finished = st, msg, copied, time.Now().UTC()
}

// skipped records move i of p as skipped, saying why: no transaction of a
// move writes that.
func (b *planBook) skipped(ctx context.Context, p *Plan, i int, slot slots.Slot, why string) error {
	err := b.dir.RecordResult(ctx, p.ID, directory.MoveResult{Index: i, Slot: slot.Int(), Status: directory.ResultSkipped, Error: why})
	if err != nil {
		return err
	}
	b.m.moves.WithLabelValues(string(MoveSkipped)).Inc()
	b.lg.Info("move skipped", "plan", p.ID, "slot", slot.Int(), "reason", why)
	b.record(p, i, MoveSkipped, why, 0)
	return nil
}

// setState rewrites plan p's record with edit, which also says what
// becomes of its run key, and keeps the cached p in step.
func (b *planBook) setState(ctx context.Context, p *Plan, edit func(q *Plan) directory.Run) error {
	b.selfWrite(p.ID)
	err := b.ctl.updateRun(ctx, p.ID, func(q *Plan) (directory.Run, error) { return edit(q), nil })
	if err != nil {
		// The write may not have happened: read the plan again.
		b.unknownWrite(p.ID)
		return err
	}
	b.recMu.Lock()
	defer b.recMu.Unlock()
	q := p.clone()
	edit(q)
	p.State, p.Error = q.State, q.Error
	return nil
}

// pause pauses an applying plan on its own, saying why.
func (b *planBook) pause(ctx context.Context, p *Plan, reason string) error {
	b.lg.Warn("pausing plan", "plan", p.ID, "reason", reason)
	return b.setState(ctx, p, func(q *Plan) directory.Run {
		if q.State != StateApplying {
			return directory.RunKeep
		}
		q.State, q.Error = StatePaused, reason
		return directory.RunStop
	})
}

// selfWrite counts a write of plan id the executor is about to make:
// counted before the write, as its watch event may come before the
// answer.
func (b *planBook) selfWrite(id string) {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	b.selfWrites[id]++
}

// unknownWrite forgets the count of a write of plan id that failed (it
// may have happened or not): the plan is read again.
func (b *planBook) unknownWrite(id string) {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	b.selfWrites[id] = 0
	b.stale[id] = true
}

// beginPlan notes that this leader is storing one-move plan id and
// beginning its move in one transaction (onemove.go).
func (b *planBook) beginPlan(id string) {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	b.selfWrites[id]++
	b.beginning[id] = true
}

// notBegun notes that the transaction of beginPlan failed: it may have
// been written or not, so the plan is read again.
func (b *planBook) notBegun(id string) {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	b.selfWrites[id] = 0
	b.stale[id] = true
	delete(b.beginning, id)
}

// handOver gives the plan loop plan p, stored and its move begun (h) by
// this leader in the transaction of beginPlan.
func (b *planBook) handOver(p *Plan, moveID string, h *handoff) {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	b.handed = append(b.handed, p)
	b.handoffs[moveID] = h
	delete(b.beginning, p.ID)
}

// beginningNow returns the plans whose transaction is in flight.
func (b *planBook) beginningNow() map[string]bool {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	if len(b.beginning) == 0 {
		return nil
	}
	return maps.Clone(b.beginning)
}

// takeHandoff returns the move id handed over in this term, once, or nil.
func (b *planBook) takeHandoff(id string, term uint64) *handoff {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	h := b.handoffs[id]
	if h == nil {
		return nil
	}
	delete(b.handoffs, id)
	if h.term != term {
		h.stop()
		return nil
	}
	return h
}

// dropHandoffs ends the early exports of moves handed over that no
// applying plan will take (keep says which plans will), or all of them.
func (b *planBook) dropHandoffs(keep func(planID string) bool) {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	for id, h := range b.handoffs {
		if keep == nil || !keep(h.mv.PlanID) {
			h.stop()
			delete(b.handoffs, id)
		}
	}
}

// takeHanded adds the plans handed over since the last call to plans
// (which the plan loop owns), unless they are there already.
func (b *planBook) takeHanded(plans []*Plan) []*Plan {
	b.staleMu.Lock()
	handed := b.handed
	b.handed = nil
	b.staleMu.Unlock()
	for _, p := range handed {
		if !slices.ContainsFunc(plans, func(q *Plan) bool { return q.ID == p.ID }) {
			plans = append(plans, p)
		}
	}
	if len(handed) > 0 {
		slices.SortStableFunc(plans, func(x, y *Plan) int { return x.Created.Compare(y.Created) })
	}
	return plans
}
