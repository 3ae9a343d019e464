package mover

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/backoff"
)

// The plan loop decides what runs next: moves left in flight outside an
// applying plan are settled first (move.go), then the applying plan's
// pending moves run in a window (window.go). The plans it decides on are
// the bookkeeping's (planbook.go).

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
	if err := e.plans.refresh(ctx); err != nil {
		return false, err
	}
	byID := map[string]*Plan{}
	var active *Plan
	for _, p := range e.plans.plans {
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
	beginning := e.plans.beginningNow()
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
		m, err := e.leftInFlight(snap, mv, byID[mv.PlanID])
		if err != nil {
			return true, err
		}
		return true, m.settle(ctx)
	}
	// A move handed over whose plan is not the one to run is resumed
	// from the directory, if at all (the plan was paused meanwhile). One
	// handed over since refresh is taken by the next step.
	e.plans.dropHandoffs(func(id string) bool {
		_, known := byID[id]
		return !known || (active != nil && active.ID == id)
	})
	if active == nil {
		e.m.bytesRemaining.Set(0)
		return false, nil
	}
	if len(active.nextN(1)) == 0 {
		return true, e.plans.finish(ctx, active)
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
