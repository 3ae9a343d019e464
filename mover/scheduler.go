package mover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/backoff"
	"github.com/slotd/slotd/slots"
)

// The scheduler decides what runs next: moves left in flight outside an
// applying plan are settled first, then the applying plan's pending moves
// run in a window of up to Parallelism at once, each donor copying at most
// one slot holding data at a time (a move that ends makes room for the
// next). It keeps the plan records with their results as last
// read; the results of this leader's own moves are added as they end (the
// directory has them already: each was written by the transaction that
// ended the move).
type scheduler struct {
	// dirty says every plan record must be read again (at the start of a
	// term); stale names the ones changed since they were read, less the
	// executor's own writes (selfWrites counts those not yet seen).
	dirty      atomic.Bool
	staleMu    sync.Mutex // guards stale, created and selfWrites
	stale      map[string]bool
	selfWrites map[string]int
	// created holds the records of stale plans whose last write seen
	// created them: new plans, with no results to read unless they ran
	// already (refreshPlans uses one only for a plan it does not hold).
	created map[string]directory.PlanRecord
	// handed are one-move plans this leader stored and begun itself
	// (onemove.go), for refreshPlans to add; handoffs their begun moves,
	// by move id, for runMove to take.
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

	// copyMu guards dataMoves (the window's moves of slots holding data)
	// and gates (per donor: full while one of them copies).
	copyMu    sync.Mutex
	dataMoves map[copyKey]bool
	gates     map[string]chan struct{}
}

func (s *scheduler) init() {
	s.stale, s.selfWrites, s.created = map[string]bool{}, map[string]int{}, map[string]directory.PlanRecord{}
	s.handoffs, s.beginning = map[string]*handoff{}, map[string]bool{}
	s.dataMoves, s.gates = map[copyKey]bool{}, map[string]chan struct{}{}
	s.dirty.Store(true)
}

// newTerm makes the next step read every plan record again.
func (s *scheduler) newTerm() { s.dirty.Store(true) }

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
	s := &e.sched
	s.staleMu.Lock()
	delete(s.created, ev.ID)
	self := s.selfWrites[ev.ID] > 0
	if self {
		s.selfWrites[ev.ID]--
	} else {
		s.stale[ev.ID] = true
		if ev.Created && ev.Record != nil {
			s.created[ev.ID] = *ev.Record
		}
	}
	s.staleMu.Unlock()
	if !self {
		// The executor's own write wakes nobody: the plan loop made it,
		// and a guard woken by it would read the plan record back in the
		// middle of the move (every `slotctl move` did).
		e.notify()
	}
}

// planLoop runs the active plan's moves, and waits for work when there is
// none.
func (e *Executor) planLoop(ctx context.Context) error {
	b := e.backoff()
	waitingInit := false
	for ctx.Err() == nil {
		worked, err := e.step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, directory.ErrNotBootstrapped) {
			// A new cluster: nothing to move until an operator assigns the
			// slots. Said once, not at every retry.
			if !waitingInit {
				waitingInit = true
				e.lg.Info("directory not initialized; waiting for slotctl init")
			}
			if !backoff.SleepContext(ctx, time.Second) {
				return nil
			}
			continue
		}
		waitingInit = false
		if err != nil {
			e.lg.Warn("mover step failed; retrying", "err", err)
			if !b.Sleep(ctx) {
				return nil
			}
			continue
		}
		b.Reset()
		if worked {
			continue
		}
		// Nothing to do: wait for a plan or throttle change, or poll now and
		// then in case a watch event was missed across a reconnect.
		t := time.NewTimer(2 * time.Second)
		select {
		case <-ctx.Done():
		case <-e.wake:
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// step does one unit of work: settle a move left in flight outside an
// applying plan, or run moves of the applying plan. It reports whether it
// did anything.
func (e *Executor) step(ctx context.Context) (bool, error) {
	snap := e.latest.Load()
	if snap == nil {
		var err error
		if snap, err = e.dir.Snapshot(ctx); err != nil {
			return false, err
		}
	}
	if err := e.refreshPlans(ctx); err != nil {
		return false, err
	}
	byID := map[string]*Plan{}
	var active *Plan
	for _, p := range e.sched.plans {
		byID[p.ID] = p
		if applying(p.State) && active == nil {
			active = p
		}
	}
	// Moves in flight that no applying plan will resume: a previous leader
	// died mid-move after the plan was paused or cancelled, or a move from
	// outside any plan. Finish them if fenced (the source refuses writes
	// already), abort them otherwise. The watched table may lag etcd: a
	// move this executor has just committed, of a plan it has just
	// finished, still shows there in flight. Settling that would fence the
	// source again and mark the done move aborted, so what to settle is
	// decided on a fresh read.
	beginning := e.sched.beginningNow()
	unowned := func(snap *directory.Snapshot) bool {
		return slices.ContainsFunc(snap.Moves, func(mv directory.Move) bool {
			p, ok := byID[mv.PlanID]
			return (!ok || !applying(p.State)) && !beginning[mv.PlanID]
		})
	}
	if unowned(snap) {
		fresh, err := e.dir.Snapshot(ctx)
		if err != nil {
			return false, err
		}
		snap = fresh
	}
	for _, mv := range snap.Moves {
		if p, ok := byID[mv.PlanID]; (ok && applying(p.State)) || beginning[mv.PlanID] {
			continue
		}
		return true, e.settle(ctx, snap, mv, byID[mv.PlanID])
	}
	// A move handed over whose plan is not the one to run is resumed
	// from the directory, if at all (the plan was paused meanwhile). One
	// handed over since refreshPlans is taken by the next step.
	e.sched.dropHandoffs(func(id string) bool {
		_, known := byID[id]
		return !known || (active != nil && active.ID == id)
	})
	if active == nil {
		e.m.bytesRemaining.Set(0)
		return false, nil
	}
	if len(active.nextN(1)) == 0 {
		return true, e.finish(ctx, active)
	}
	if snap.Version < active.BaseVersion {
		// The watched table is older than the one the plan was made on
		// (a rollback stored right after the commits it reverses): its
		// moves are decided on a fresh read, or a slot the plan moves back
		// would look as if it had never left, and its move be skipped.
		fresh, err := e.dir.Snapshot(ctx)
		if err != nil {
			return false, err
		}
		snap = fresh
	}
	pr := active.Progress()
	e.m.bytesRemaining.Set(float64(max(pr.Bytes-pr.BytesDone, 0)))
	g := e.guardPlan(ctx, active)
	defer g.stop()
	return true, e.runWindow(ctx, snap, active, g)
}

// windowBatch is how many moves, in units of Parallelism, runWindow starts
// before it returns to the plan loop (which then refreshes the plans).
// Each return drains the window (its last moves run with the window
// emptying), so it is a cost per batch: 64 makes six of them in a
// 3 -> 4 rebalance of 4,096 slots at the default window (12), not twenty-two.
const windowBatch = 64

// What "one slot at a time" (seed 002, rule 2) means here: each donor
// streams at most one snapshot of a slot holding data at a time. A move's
// copy is what loads its donor (a scan of the whole slot, its bytes
// through the donor's throttle); its catch-up, fence, drain and commit are
// small reads and directory round trips. So a donor's data moves wait at
// the donor's gate before their copy (acquireCopy, from transferWith) and
// pass it on when their copy is over (Transfer.Copied), and the window
// keeps the donor's next data move begun and waiting at the gate
// (readyPerDonor): its directory round trips are then no gap in the
// donor's copy, which stays continuous under the throttle. Near-empty
// slots (SmallSlotBytes) copy in one small batch and share the window,
// several at once; moves from other donors run alongside; at most
// Parallelism are in flight. The seed's other rule, one membership change
// at a time, is the plan's: one plan applies at a time, and its node edits
// are made before its first move.

// readyPerDonor bounds a donor's data moves in flight: one copying, and
// the next begun and waiting at the donor's gate.
const readyPerDonor = 2

// window is runWindow's state: the moves it started that have not ended,
// and the data moves among them per donor.
type window struct {
	mu       sync.Mutex // guards running, data, inFlight, errs, from and remaining
	running  map[int]bool
	data     map[string]int // data moves in flight, by donor id
	inFlight int
	errs     []error
	// from is the first move pick looks at: the ones before it ended for
	// good (a window of a 4,096-move plan picks 768 times; each scan from
	// the start held recMu over the ended prefix).
	from int
	// remaining is the plan's estimated bytes not moved yet (the
	// slotd_mover_bytes_remaining gauge).
	remaining int64
	// changed wakes the loop when a move ends.
	changed chan struct{}
}

func (w *window) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// copyKey names a move of a plan.
type copyKey struct {
	plan  string
	index int
}

// markData registers move k as moving a slot holding data: its copies
// wait for their donor's gate.
func (s *scheduler) markData(k copyKey, data bool) {
	s.copyMu.Lock()
	defer s.copyMu.Unlock()
	if data {
		s.dataMoves[k] = true
	} else {
		delete(s.dataMoves, k)
	}
}

// isData reports whether move k was registered as moving a slot holding
// data.
func (s *scheduler) isData(k copyKey) bool {
	s.copyMu.Lock()
	defer s.copyMu.Unlock()
	return s.dataMoves[k]
}

// acquireCopy waits until move mv may copy: at once for a near-empty slot
// or a move outside the window (one settled), else when no other copy of
// a slot holding data runs on its donor. release (idempotent) passes the
// donor on; an error is ctx's.
func (s *scheduler) acquireCopy(ctx context.Context, mv directory.Move) (release func(), err error) {
	s.copyMu.Lock()
	if !s.dataMoves[copyKey{mv.PlanID, mv.Index}] {
		s.copyMu.Unlock()
		return func() {}, nil
	}
	gate := s.gates[mv.From]
	if gate == nil {
		gate = make(chan struct{}, 1)
		s.gates[mv.From] = gate
	}
	s.copyMu.Unlock()
	select {
	case gate <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for donor %s to copy slot %d: %w", mv.From, mv.Slot.Int(), ctx.Err())
	}
	var once sync.Once
	return func() { once.Do(func() { <-gate }) }, nil
}

// runWindow runs the pending moves of plan p with up to Parallelism in
// flight, of which at most readyPerDonor move slots holding data from one
// donor (their copies take turns at the donor's gate): a move that ends
// makes room for the next pending one that may run (plan order, skipping
// data moves of a donor that has its share). It stops starting moves
// after windowBatch*Parallelism of them, when p stops applying (a move
// paused it, or the operator did: g halts), or when a move returns an
// error, and returns once the moves in flight have ended.
func (e *Executor) runWindow(ctx context.Context, snap *directory.Snapshot, p *Plan, g *planGuard) error {
	w := &window{running: map[int]bool{}, data: map[string]int{}, changed: make(chan struct{}, 1)}
	e.sched.recMu.Lock()
	pr := p.Progress()
	e.sched.recMu.Unlock()
	w.remaining = pr.Bytes - pr.BytesDone
	limit := e.cfg.Parallelism
	var small func(i int) bool
	if limit > 1 && len(p.Moves) > 1 {
		// (A plan of one move, `slotctl move`, has nothing to share its
		// donor with: no sizes to ask for before it starts.)
		small = e.nearEmpty(ctx, snap, p, windowBatch*limit)
	}
	var wg sync.WaitGroup
	for started := 0; started < windowBatch*limit; {
		i, data, wait := e.pick(ctx, w, p, g, limit, small)
		if wait {
			select {
			case <-w.changed:
			case <-ctx.Done():
			}
			continue
		}
		if i < 0 {
			break
		}
		started++
		// A later move checks the table on the newest one watched.
		at := snap
		if l := e.latest.Load(); l != nil && l.Version > at.Version {
			at = l
		}
		donor := p.Moves[i].From
		k := copyKey{p.ID, i}
		e.sched.markData(k, data)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.runMove(ctx, at, p, i, g)
			e.sched.markData(k, false)
			e.sched.recMu.Lock()
			done, bytes := p.Moves[i].Status == MoveDone, p.Moves[i].Bytes
			e.sched.recMu.Unlock()
			w.mu.Lock()
			if done {
				// The gauge follows the window, not only its batches.
				w.remaining -= bytes
				e.m.bytesRemaining.Set(float64(max(w.remaining, 0)))
			}
			delete(w.running, i)
			if data {
				w.data[donor]--
			}
			w.inFlight--
			if err != nil {
				w.errs = append(w.errs, err)
			}
			w.mu.Unlock()
			w.signal()
		}()
	}
	wg.Wait()
	return errors.Join(w.errs...)
}

// pick chooses the next move of p to start and marks it running: the
// first runnable one not running that the window has room for, and, if
// its slot holds data (data), its donor too. It returns i < 0 when no
// move should start any more, and wait when one may start after a move in
// flight ends or is fenced.
func (e *Executor) pick(ctx context.Context, w *window, p *Plan, g *planGuard, limit int, small func(int) bool) (i int, data, wait bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e.sched.recMu.Lock() // moves write p's statuses and state under it
	defer e.sched.recMu.Unlock()
	if len(w.errs) > 0 || !applying(p.State) || g.halted.Load() || ctx.Err() != nil {
		return -1, false, false
	}
	blocked := false
	for k := w.from; k < len(p.Moves); k++ {
		m := p.Moves[k]
		// A failed move is runnable again once its plan is resumed; the
		// one failing now stays running until it paused the plan.
		if !m.Status.runnable() || w.running[k] {
			if k == w.from && !m.Status.runnable() && !w.running[k] {
				w.from++ // done, skipped or aborted: never runnable again
			}
			continue
		}
		if w.inFlight >= limit {
			return -1, false, true
		}
		isData := small == nil || !small(k)
		if isData && w.data[m.From] >= readyPerDonor {
			blocked = true
			continue
		}
		w.running[k] = true
		w.inFlight++
		if isData {
			w.data[m.From]++
		}
		return k, isData, false
	}
	return -1, false, blocked
}

// nearEmpty returns whether move i of p moves a near-empty slot, for the
// first n runnable moves: the larger of the plan's estimate and what the
// donor reports now is at most SmallSlotBytes. A donor that does not
// answer makes its slots count as holding data, as do moves beyond the
// first n (a later window asks again).
func (e *Executor) nearEmpty(ctx context.Context, snap *directory.Snapshot, p *Plan, n int) func(int) bool {
	limit := e.cfg.SmallSlotBytes
	if limit < 0 {
		limit = 0
	}
	e.sched.recMu.Lock()
	byDonor := map[string][]uint32{}
	asked := map[int]int64{} // move index -> the plan's estimate
	for k, m := range p.Moves {
		if len(asked) == n {
			break
		}
		if m.Status.runnable() {
			asked[k] = m.Bytes
			byDonor[m.From] = append(byDonor[m.From], uint32(m.Slot))
		}
	}
	e.sched.recMu.Unlock()
	reported := map[string]map[uint32]int64{}
	var mu sync.Mutex // guards reported
	var wg sync.WaitGroup
	for donor, ss := range byDonor {
		nd, ok := snap.Node(donor)
		if !ok || nd.Addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sizes, err := e.cfg.Stores.SizesOn(ctx, nd.Addr, ss)
			if err != nil {
				e.lg.Warn("donor's slot sizes unknown; its slots count as holding data", "node", donor, "err", err)
				return
			}
			mu.Lock()
			reported[donor] = sizes
			mu.Unlock()
		}()
	}
	wg.Wait()
	small := make(map[int]bool, len(asked))
	for k, est := range asked {
		m := p.Moves[k]
		sizes, ok := reported[m.From]
		if !ok {
			continue
		}
		small[k] = max(est, sizes[uint32(m.Slot)]) <= limit
	}
	return func(i int) bool { return small[i] }
}

// refreshPlans brings the cached plan records up to date: all of them at
// the start of a term, else only those written by someone else since.
func (e *Executor) refreshPlans(ctx context.Context) error {
	s := &e.sched
	if s.dirty.Swap(false) || s.plans == nil {
		s.staleMu.Lock()
		clear(s.stale)
		clear(s.selfWrites)
		clear(s.created)
		s.handed = nil
		s.staleMu.Unlock()
		s.dropHandoffs(nil) // the read finds them, begun
		plans, err := e.ctl.List(ctx)
		if err != nil {
			s.dirty.Store(true)
			return err
		}
		s.plans = plans
		return nil
	}
	s.plans = s.takeHanded(s.plans)
	s.staleMu.Lock()
	ids := make([]string, 0, len(s.stale))
	for id := range s.stale {
		ids = append(ids, id)
	}
	clear(s.stale)
	created := s.created
	s.created = map[string]directory.PlanRecord{}
	s.staleMu.Unlock()
	for k, id := range ids {
		var p *Plan
		var err error
		known := slices.ContainsFunc(s.plans, func(q *Plan) bool { return q.ID == id })
		if rec, ok := created[id]; ok && !known {
			// New since this term's first read, and not run since: no
			// result to merge. (A plan the term's read already held may
			// have run moves by the time its creation is seen: read it.)
			p, err = e.ctl.decode(id, rec.Data)
		} else {
			p, err = e.ctl.Get(ctx, id)
		}
		if errors.Is(err, ErrNotFound) {
			s.plans = slices.DeleteFunc(s.plans, func(q *Plan) bool { return q.ID == id })
			continue
		}
		if err != nil {
			// This plan and those not read yet are read next time.
			s.staleMu.Lock()
			for _, left := range ids[k:] {
				s.stale[left] = true
			}
			s.staleMu.Unlock()
			return err
		}
		if i := slices.IndexFunc(s.plans, func(q *Plan) bool { return q.ID == id }); i >= 0 {
			s.plans[i] = p
		} else {
			s.plans = append(s.plans, p)
			slices.SortStableFunc(s.plans, func(a, b *Plan) int { return a.Created.Compare(b.Created) })
		}
	}
	return nil
}

// finish marks an applying plan with nothing left to run as done (its
// results are this leader's, read at the start of its term and kept since).
func (e *Executor) finish(ctx context.Context, p *Plan) error {
	err := e.setState(ctx, p, func(q *Plan) directory.Run {
		if q.State != StateApplying {
			return directory.RunKeep
		}
		q.State = StateDone
		return directory.RunStop
	})
	if err == nil {
		pr := p.Progress()
		e.lg.Info("plan done", "plan", p.ID, "moves", pr.Done, "skipped", pr.Skipped, "bytes_copied", pr.BytesCopied)
	}
	return err
}

// recordMove notes move i's result in the cached plan, for the scheduler.
func (e *Executor) recordMove(p *Plan, i int, st MoveStatus, msg string, copied int64) {
	if p == nil || i < 0 || i >= len(p.Moves) {
		return
	}
	e.sched.recMu.Lock()
	defer e.sched.recMu.Unlock()
	m := &p.Moves[i]
	m.Status, m.Error, m.Copied, m.Finished = st, msg, copied, time.Now().UTC()
}

// skipped records move i of p as skipped, saying why: no transaction of a
// move writes that.
func (e *Executor) skipped(ctx context.Context, p *Plan, i int, slot slots.Slot, why string) error {
	err := e.dir.RecordResult(ctx, p.ID, directory.MoveResult{Index: i, Slot: slot.Int(), Status: directory.ResultSkipped, Error: why})
	if err != nil {
		return err
	}
	e.m.moves.WithLabelValues(string(MoveSkipped)).Inc()
	e.lg.Info("move skipped", "plan", p.ID, "slot", slot.Int(), "reason", why)
	e.recordMove(p, i, MoveSkipped, why, 0)
	return nil
}

// setState rewrites plan p's record with edit, which also says what
// becomes of its run key, and keeps the cached p in step.
func (e *Executor) setState(ctx context.Context, p *Plan, edit func(q *Plan) directory.Run) error {
	s := &e.sched
	s.staleMu.Lock()
	s.selfWrites[p.ID]++
	s.staleMu.Unlock()
	err := e.ctl.updateRun(ctx, p.ID, func(q *Plan) (directory.Run, error) { return edit(q), nil })
	if err != nil {
		// The write may not have happened: read the plan again.
		s.staleMu.Lock()
		s.selfWrites[p.ID] = 0
		s.stale[p.ID] = true
		s.staleMu.Unlock()
		return err
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	q := p.clone()
	edit(q)
	p.State, p.Error = q.State, q.Error
	return nil
}

// pausePlan pauses an applying plan on its own, saying why.
func (e *Executor) pausePlan(ctx context.Context, p *Plan, reason string) error {
	e.lg.Warn("pausing plan", "plan", p.ID, "reason", reason)
	return e.setState(ctx, p, func(q *Plan) directory.Run {
		if q.State != StateApplying {
			return directory.RunKeep
		}
		q.State, q.Error = StatePaused, reason
		return directory.RunStop
	})
}
