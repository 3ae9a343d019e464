package mover

import (
	"context"
	"sync"
	"sync/atomic"
)

// planGuard applies an operator's pause and cancel to the moves of a plan
// in flight. New moves are stopped by the directory: a pause or cancel
// deletes the plan's run key in the transaction that stores the new
// state, and every BeginMove compares it. The guard halts the plan's
// window and, when the plan stops with abort requested (cancel, or pause
// --abort), aborts the moves in flight not yet fencing (a fenced move is
// finished: quicker, and as safe).
type planGuard struct {
	mu    sync.Mutex // guards moves and fired
	moves map[*atomic.Bool]context.CancelFunc
	fired bool // abort requested: moves added later are cancelled at once
	// halted is set once the plan is seen not applying: no new move of it
	// may start.
	halted atomic.Bool
	// state is the plan's state when halted was set.
	state atomic.Value // PlanState
	// seen counts the plan records the guard has looked at (tests wait
	// for it).
	seen atomic.Int64
	done chan struct{}
	wg   sync.WaitGroup
}

// guardPlan starts watching plan p; call stop when its moves ended.
func (e *Executor) guardPlan(ctx context.Context, p *Plan) *planGuard {
	g := &planGuard{moves: map[*atomic.Bool]context.CancelFunc{}, done: make(chan struct{})}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-g.done:
				return
			case <-e.wake:
			}
			// The record alone: its state, not the moves' results.
			q, err := e.ctl.record(ctx, p.ID)
			if err != nil || !e.guarded(q) {
				g.seen.Add(1)
				continue
			}
			g.state.Store(q.State)
			g.halted.Store(true)
			if q.AbortCurrent {
				e.lg.Info("plan stopped; aborting the moves in flight that are not fencing", "plan", p.ID, "state", q.State)
				g.fire()
				g.seen.Add(1)
				return
			}
			// Finish the moves; the loop sees the state afterwards.
			g.seen.Add(1)
			e.notify()
		}
	}()
	return g
}

// guarded reports whether plan record q stopped applying, so that the
// guard must act.
func (e *Executor) guarded(q *Plan) bool { return !applying(q.State) }

// applying reports whether the executor runs a plan in state st.
func applying(st PlanState) bool {
	return st == StateApplying || ignorePause && st == StatePaused
}

// cancelled reports whether the guard saw the plan cancelled.
func (g *planGuard) cancelled() bool {
	st, _ := g.state.Load().(PlanState)
	return st == StateCancelled
}

func (g *planGuard) fire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fired = true
	for fencing, cancel := range g.moves {
		if !fencing.Load() {
			cancel()
		}
	}
}

// add guards one move until the returned function is called.
func (g *planGuard) add(fencing *atomic.Bool, cancel context.CancelFunc) (remove func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fired && !fencing.Load() {
		cancel()
	}
	g.moves[fencing] = cancel
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.moves, fencing)
	}
}

func (g *planGuard) stop() {
	close(g.done)
	g.wg.Wait()
}
