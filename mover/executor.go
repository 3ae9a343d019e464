package mover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// ExecutorConfig configures an Executor. Zero fields take defaults.
type ExecutorConfig struct {
	Directory *directory.Directory // required
	Control   *Control             // required
	Etcd      *clientv3.Client     // required: leader election
	Stores    *StorePool           // required
	// Name identifies this candidate in the election and in history.
	Name       string
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// SessionTTL is the leader lease in seconds: a dead leader is replaced
	// after about this long. Default 5.
	SessionTTL int
	// MoveAttempts is how often a move is tried (resuming from its recorded
	// phase) after transient failures before it is aborted and the plan
	// paused. Default 5.
	MoveAttempts int
	// Verify compares source and target checksums inside the fence.
	// It costs a scan of the slot on both nodes and lengthens the write
	// pause, so it is off by default; every key's slot is always checked.
	Verify bool
	// Backoff is the first retry delay (doubling, jittered, capped at 5s).
	// Default 100ms.
	Backoff time.Duration
	// Parallelism is how many moves of a plan run at once: up to
	// Parallelism are in flight, and a move that ends makes room for the
	// next pending one. Default 1: one slot at a time. Higher
	// values hide the per-move round trips (their directory writes are
	// group-committed); the throttle stays a per-donor rate, because a
	// store's export token bucket is per node. At most MaxParallelism.
	Parallelism int
	// RunLiveness makes the leader also run the directory's liveness loop.
	// Default true via NewExecutor unless DisableLiveness.
	DisableLiveness bool
}

// MaxParallelism bounds ExecutorConfig.Parallelism.
const MaxParallelism = 64

// MoveProgress is the live state of a move being executed.
type MoveProgress struct {
	PlanID  string
	MoveID  string
	Slot    int
	From    string
	To      string
	Phase   string
	Bytes   int64
	Keys    int64
	Started time.Time
}

// Executor runs plans, one slot at a time unless configured for more
// (Parallelism), while it holds the cluster's mover leadership. Every
// slotd runs one; exactly one leads. Safe for concurrent use.
type Executor struct {
	cfg ExecutorConfig
	dir *directory.Directory
	ctl *Control
	lg  *slog.Logger
	m   *metrics

	leader   atomic.Bool
	throttle atomic.Int64 // donor rate in force; -1 before the first read
	// latest is the newest table seen by the leader's watch; moves check
	// against it and BeginMove re-checks against etcd.
	latest atomic.Pointer[directory.Snapshot]
	// plansDirty says every plan record must be read again (at the start
	// of a term); stale names the ones changed since they were read, less
	// the executor's own writes (selfWrites counts those not yet seen).
	plansDirty atomic.Bool
	staleMu    sync.Mutex // guards stale and selfWrites
	stale      map[string]bool
	selfWrites map[string]int

	// Owned by the plan loop goroutine, and by the moves in flight under
	// recMu: the plan records with their results as last read, and the
	// results of this leader's own moves since (the directory has them
	// too: each was written by the transaction that ended the move).
	recMu sync.Mutex
	plans []*Plan

	mu       sync.Mutex               // guards inflight, cleanups and attempts
	inflight map[string]*MoveProgress // by move id
	cleanups []cleanup
	attempts map[string]int // failed tries by move id

	wake chan struct{} // plans or throttle changed
}

// cleanup is store-side work left after a move: dropping a handed-off or
// partial copy, ending a capture. It is retried until it succeeds or the
// leader changes; a new leader asks again for the moves committed in the
// recent history (requeueDrops).
type cleanup struct {
	addr    string
	slot    slots.Slot
	moveID  string
	version uint64 // DropSlot's version; 0 for a target's partial copy
	drop    bool   // DropSlot, else EndCapture
}

// NewExecutor returns an executor; call Run.
func NewExecutor(cfg ExecutorConfig) (*Executor, error) {
	if cfg.Directory == nil || cfg.Control == nil || cfg.Etcd == nil || cfg.Stores == nil {
		return nil, fmt.Errorf("%w: executor needs a directory, a control, an etcd client and a store pool", ErrInvalid)
	}
	if cfg.Name == "" {
		return nil, fmt.Errorf("%w: executor needs a name", ErrInvalid)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 5
	}
	if cfg.MoveAttempts == 0 {
		cfg.MoveAttempts = 5
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.Parallelism == 0 {
		cfg.Parallelism = 1
	}
	if cfg.Parallelism < 1 || cfg.Parallelism > MaxParallelism {
		return nil, fmt.Errorf("%w: parallelism %d is not in 1-%d", ErrInvalid, cfg.Parallelism, MaxParallelism)
	}
	e := &Executor{cfg: cfg, dir: cfg.Directory, ctl: cfg.Control, lg: cfg.Logger.With("mover", cfg.Name),
		m: newMetrics(cfg.Registerer), wake: make(chan struct{}, 1), attempts: map[string]int{}, inflight: map[string]*MoveProgress{}}
	e.throttle.Store(-1)
	e.plansDirty.Store(true)
	e.stale, e.selfWrites = map[string]bool{}, map[string]int{}
	return e, nil
}

// IsLeader reports whether this executor currently leads.
func (e *Executor) IsLeader() bool { return e.leader.Load() }

// Leader returns the name of the current leader, "" when there is none.
func (e *Executor) Leader(ctx context.Context) (string, error) {
	resp, err := e.cfg.Etcd.Get(ctx, e.dir.LeaderElectionPrefix(), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("read mover leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// InFlight returns the moves being executed by this executor, by slot.
func (e *Executor) InFlight() []MoveProgress {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]MoveProgress, 0, len(e.inflight))
	for _, p := range e.inflight {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b MoveProgress) int { return a.Slot - b.Slot })
	return out
}

// Run campaigns for leadership and, while leading, runs plans. It returns
// nil when ctx is done. Losing the etcd session cancels everything done as
// leader, so a deposed leader stops before a new one starts moving.
func (e *Executor) Run(ctx context.Context) error {
	backoff := e.cfg.Backoff
	for ctx.Err() == nil {
		err := e.campaign(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			e.lg.Warn("mover election failed; retrying", "err", err, "in", backoff)
		}
		if !sleep(ctx, jitter(backoff)) {
			return nil
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return nil
}

// campaign waits to be elected, leads until the session or ctx ends, then
// resigns.
func (e *Executor) campaign(ctx context.Context) error {
	session, err := concurrency.NewSession(e.cfg.Etcd, concurrency.WithTTL(e.cfg.SessionTTL), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("new etcd session: %w", err)
	}
	defer session.Close()
	el := concurrency.NewElection(session, e.dir.LeaderElectionPrefix())
	if err := el.Campaign(ctx, e.cfg.Name); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	leadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// Ends with leadCtx at the latest, so it never outlives campaign.
		select {
		case <-session.Done():
			e.lg.Warn("mover leadership lost: etcd session ended")
			cancel()
		case <-leadCtx.Done():
		}
	}()
	e.lg.Info("mover leader elected")
	e.leader.Store(true)
	e.m.leader.Set(1)
	err = e.lead(leadCtx)
	e.leader.Store(false)
	e.m.leader.Set(0)
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	if rerr := el.Resign(rctx); rerr != nil && ctx.Err() == nil {
		e.lg.Warn("resign mover leadership", "err", rerr)
	}
	if err != nil && leadCtx.Err() == nil {
		return err
	}
	return nil
}

// lead runs the leader's parts until ctx ends. Shutdown order: ctx
// cancellation stops, in any order, 1. the plan loop (a move in flight is
// left in its recorded phase for the next leader), 2. the watches, 3. the
// cleanup loop, 4. liveness; errgroup waits for all of them.
func (e *Executor) lead(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	e.latest.Store(nil)
	e.plansDirty.Store(true)
	g.Go(func() error {
		return ignoreCanceled(e.dir.WatchPlans(gctx, e.planChanged))
	})
	g.Go(func() error {
		return ignoreCanceled(e.dir.Watch(gctx, 0, func(s *directory.Snapshot) error {
			e.latest.Store(s)
			e.m.observeTable(s)
			return nil
		}))
	})
	g.Go(func() error {
		return ignoreCanceled(e.dir.WatchThrottle(gctx, e.setThrottle))
	})
	g.Go(func() error {
		e.requeueDrops(gctx)
		return e.cleanupLoop(gctx)
	})
	if !e.cfg.DisableLiveness {
		g.Go(func() error { return ignoreCanceled(e.dir.RunLiveness(gctx)) })
	}
	g.Go(func() error { return e.planLoop(gctx) })
	return g.Wait()
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// planChanged notes a write of plan id seen by the watch. The executor's
// own writes are already in its cached records: re-reading a plan of
// thousands of moves after each of them would cost more than the moves.
func (e *Executor) planChanged(id string) {
	e.staleMu.Lock()
	if e.selfWrites[id] > 0 {
		e.selfWrites[id]--
	} else {
		e.stale[id] = true
	}
	e.staleMu.Unlock()
	e.notify()
}

func (e *Executor) notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// setThrottle applies a new donor rate, to the moves in flight too.
func (e *Executor) setThrottle(bps int64) {
	e.throttle.Store(bps)
	e.m.throttle.Set(float64(bps))
	e.mu.Lock()
	donors := map[string]bool{}
	for _, p := range e.inflight {
		donors[p.From] = true
	}
	e.mu.Unlock()
	if len(donors) == 0 {
		return
	}
	// The source's token bucket is per node: setting it changes the rate of
	// the running export and change stream within the node's refill tick.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	snap, err := e.dir.Snapshot(ctx)
	if err != nil {
		return
	}
	for id := range donors {
		n, ok := snap.Node(id)
		if !ok {
			continue
		}
		if c, err := e.cfg.Stores.Client(n.Addr); err == nil {
			if _, err := c.SetExportRate(ctx, &slotdv1.SetExportRateRequest{BytesPerSecond: uint64(bps)}); err != nil {
				e.lg.Warn("set export rate on source", "node", n.ID, "err", err)
			}
		}
	}
	e.lg.Info("throttle applied", "bytes_per_second", bps)
}

func (e *Executor) rate(ctx context.Context) uint64 {
	v := e.throttle.Load()
	if v < 0 {
		t, err := e.ctl.Throttle(ctx)
		if err != nil {
			t = DefaultThrottle
		}
		v = t
	}
	return uint64(v)
}

// planLoop runs the active plan's moves one at a time, and waits for work
// when there is none.
func (e *Executor) planLoop(ctx context.Context) error {
	backoff := e.cfg.Backoff
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
			if !sleep(ctx, jitter(time.Second)) {
				return nil
			}
			continue
		}
		waitingInit = false
		if err != nil {
			e.lg.Warn("mover step failed; retrying", "err", err, "in", backoff)
			if !sleep(ctx, jitter(backoff)) {
				return nil
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = e.cfg.Backoff
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

// step does one unit of work: settle moves left in flight outside an
// applying plan, or run the next move of the applying plan. It reports
// whether it did anything.
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
	for _, p := range e.plans {
		byID[p.ID] = p
		if p.State == StateApplying && active == nil {
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
	unowned := func(snap *directory.Snapshot) bool {
		return slices.ContainsFunc(snap.Moves, func(mv directory.Move) bool {
			p, ok := byID[mv.PlanID]
			return !ok || p.State != StateApplying
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
		if p, ok := byID[mv.PlanID]; ok && p.State == StateApplying {
			continue
		}
		return true, e.settle(ctx, snap, mv, byID[mv.PlanID])
	}
	if active == nil {
		e.m.bytesRemaining.Set(0)
		return false, nil
	}
	wave := active.nextN(e.cfg.Parallelism)
	if len(wave) == 0 {
		return true, e.finish(ctx, active)
	}
	pr := active.Progress()
	e.m.bytesRemaining.Set(float64(max(pr.Bytes-pr.BytesDone, 0)))
	g := e.guardPlan(ctx, active.ID)
	defer g.stop()
	if e.cfg.Parallelism == 1 {
		return true, e.runMove(ctx, snap, active, wave[0], g)
	}
	return true, e.runWindow(ctx, snap, active, g)
}

// windowBatch is how many moves, in units of Parallelism, runWindow starts
// before it returns to the plan loop (which then refreshes the plans).
const windowBatch = 16

// runWindow runs the pending moves of plan p with up to Parallelism in
// flight: a move that ends makes room for the next pending one at once.
// (Waves, where the next Parallelism moves started when all of the
// previous ones had ended, waited for each wave's slowest move.) It stops
// starting moves after windowBatch*Parallelism of them, when p stops
// applying (a move paused it, or the operator did: g halts), or when a move
// returns an error, and returns once the moves in flight have ended.
func (e *Executor) runWindow(ctx context.Context, snap *directory.Snapshot, p *Plan, g *planGuard) error {
	var (
		mu      sync.Mutex // guards running and errs
		running = map[int]bool{}
		errs    []error
		wg      sync.WaitGroup
	)
	room := make(chan struct{}, e.cfg.Parallelism)
	for started := 0; started < windowBatch*e.cfg.Parallelism; started++ {
		room <- struct{}{} // blocks while Parallelism moves are in flight
		i := -1
		mu.Lock()
		e.recMu.Lock() // moves write p's statuses and state under it
		if len(errs) == 0 && p.State == StateApplying && !g.halted.Load() && ctx.Err() == nil {
			for k, m := range p.Moves {
				if (m.Status == MovePending || m.Status == "") && !running[k] {
					i = k
					break
				}
			}
		}
		e.recMu.Unlock()
		if i >= 0 {
			running[i] = true
		}
		mu.Unlock()
		if i < 0 {
			break
		}
		// A later move checks the table on the newest one watched.
		at := snap
		if l := e.latest.Load(); l != nil && l.Version > at.Version {
			at = l
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.runMove(ctx, at, p, i, g)
			mu.Lock()
			delete(running, i)
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
			<-room
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// refreshPlans brings the cached plan records up to date: all of them at
// the start of a term, else only those written by someone else since.
// Results not yet written stay applied to the fresh records.
func (e *Executor) refreshPlans(ctx context.Context) error {
	if e.plansDirty.Swap(false) || e.plans == nil {
		e.staleMu.Lock()
		clear(e.stale)
		clear(e.selfWrites)
		e.staleMu.Unlock()
		plans, err := e.ctl.List(ctx)
		if err != nil {
			e.plansDirty.Store(true)
			return err
		}
		e.plans = plans
		return nil
	}
	e.staleMu.Lock()
	ids := make([]string, 0, len(e.stale))
	for id := range e.stale {
		ids = append(ids, id)
	}
	clear(e.stale)
	e.staleMu.Unlock()
	for _, id := range ids {
		p, err := e.ctl.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			e.plans = slices.DeleteFunc(e.plans, func(q *Plan) bool { return q.ID == id })
			continue
		}
		if err != nil {
			e.staleMu.Lock()
			e.stale[id] = true
			e.staleMu.Unlock()
			return err
		}
		if i := slices.IndexFunc(e.plans, func(q *Plan) bool { return q.ID == id }); i >= 0 {
			e.plans[i] = p
		} else {
			e.plans = append(e.plans, p)
			slices.SortStableFunc(e.plans, func(a, b *Plan) int { return a.Created.Compare(b.Created) })
		}
	}
	return nil
}

// finish marks an applying plan with nothing left as done.
func (e *Executor) finish(ctx context.Context, p *Plan) error {
	err := e.setState(ctx, p, func(q *Plan) directory.Run {
		// Nothing is left to run: p's results are this leader's, read
		// from the directory at the start of its term and kept since.
		if q.State != StateApplying {
			return directory.RunKeep
		}
		q.State = StateDone
		return directory.RunStop
	})
	if err == nil {
		pr := p.Progress()
		e.lg.Info("plan done", "plan", p.ID, "moves", pr.Done, "skipped", pr.Skipped, "bytes", pr.BytesDone)
	}
	return err
}

// settle finishes or aborts a move that no applying plan owns.
func (e *Executor) settle(ctx context.Context, snap *directory.Snapshot, mv directory.Move, p *Plan) error {
	src, dst, err := e.endpoints(snap, mv.From, mv.To)
	if err != nil {
		return err
	}
	if mv.Phase == directory.PhaseFenced && (p == nil || !p.AbortCurrent || p.State == StateCancelled) {
		e.lg.Info("finishing fenced move left in flight", "slot", mv.Slot.Int(), "move", mv.MoveID, "plan", mv.PlanID)
		res, err := e.transfer(ctx, mv, src, dst, StepFenced)
		if err == nil {
			e.committed(ctx, mv, src, res)
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

type storeEnd struct {
	id, addr string
	c        slotdv1.StoreClient
}

// runMove executes move i of plan p; g aborts it if the plan is stopped
// with abort requested. With Parallelism > 1 moves run it concurrently:
// what they share in p and the executor is written under recMu
// (recordMove, pausePlan).
func (e *Executor) runMove(ctx context.Context, snap *directory.Snapshot, p *Plan, i int, g *planGuard) error {
	pm := p.Moves[i]
	slot, err := slots.New(pm.Slot)
	if err != nil {
		return e.pausePlan(ctx, p, fmt.Sprintf("move %d: %v", i, err))
	}
	moveID := moveID(p.ID, i)
	// check decides on a table: skip the move, refuse it (a reason to
	// pause), or go ahead.
	check := func(snap *directory.Snapshot) (skip bool, refuse string) {
		owner := snap.Owner(slot)
		mv, inFlight := snap.Move(slot)
		switch {
		case inFlight && mv.MoveID != moveID:
			return false, fmt.Sprintf("slot %d has another move in flight (%s); wait for it and resume", pm.Slot, mv.MoveID)
		case !inFlight && owner == pm.To:
			// Committed by a previous leader that died before recording it.
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
	skip, refuse := check(snap)
	if refuse != "" {
		// The watched table may lag etcd (a node the plan just registered,
		// say): decide on a fresh read before pausing anything.
		fresh, err := e.dir.Snapshot(ctx)
		if err != nil {
			return err
		}
		snap = fresh
		if skip, refuse = check(snap); refuse != "" {
			return e.pausePlan(ctx, p, refuse)
		}
	}
	if skip {
		return e.skipped(ctx, p, i, slot, fmt.Sprintf("slot %d was on %s already", pm.Slot, pm.To))
	}
	mv, inFlight := snap.Move(slot)
	src, dst, err := e.endpoints(snap, pm.From, pm.To)
	if err != nil {
		return e.pausePlan(ctx, p, err.Error())
	}
	step := StepCopy
	fresh := false
	if !inFlight {
		m, err := e.dir.BeginMove(ctx, directory.MoveSpec{
			Slot: slot, From: pm.From, To: pm.To, MoveID: moveID, PlanID: p.ID, Index: i, Reason: pm.Reason, By: "mover/" + e.cfg.Name,
		})
		if err != nil {
			if errors.Is(err, directory.ErrPrecondition) {
				// Paused or cancelled since the plan was read: its run key
				// is gone, and the guard will see the new state.
				if running, rerr := e.dir.Running(ctx, p.ID); rerr == nil && !running {
					g.halted.Store(true)
					return nil
				}
			}
			if errors.Is(err, directory.ErrPrecondition) || errors.Is(err, directory.ErrNotFound) || errors.Is(err, directory.ErrInvalid) {
				// The watched table may lag etcd: decide on a fresh read.
				fresh, ferr := e.dir.Snapshot(ctx)
				if ferr != nil {
					return ferr
				}
				if _, busy := fresh.Move(slot); !busy && fresh.Owner(slot) == pm.To {
					return e.skipped(ctx, p, i, slot, fmt.Sprintf("slot %d was on %s already", pm.Slot, pm.To))
				}
				return e.pausePlan(ctx, p, fmt.Sprintf("cannot begin move of slot %d: %v", pm.Slot, err))
			}
			return err
		}
		mv = *m
		fresh = true
	} else {
		step = stepOf(mv.Phase)
		e.lg.Info("resuming move", "slot", pm.Slot, "move", moveID, "phase", mv.Phase)
	}

	// The plan may be paused or cancelled while the move runs: abort it
	// then, unless the source is already fenced (finishing is quicker and
	// as safe).
	moveCtx, cancelMove := context.WithCancel(ctx)
	defer cancelMove()
	var fencing atomic.Bool
	unguard := g.add(&fencing, cancelMove)
	res, err := e.transferWith(moveCtx, mv, src, dst, step, fresh, &fencing)
	unguard()
	if err == nil {
		e.committed(ctx, mv, src, res)
		e.recordMove(p, i, MoveDone, "", res.Bytes)
		return nil
	}
	if ctx.Err() != nil {
		return nil // leadership lost: the next leader resumes from the recorded phase
	}
	if moveCtx.Err() != nil {
		// Paused or cancelled with the move before the fence.
		cur, gerr := e.ctl.Get(ctx, p.ID)
		status := MovePending
		if gerr == nil && cur.State == StateCancelled {
			status = MoveAborted
		}
		if err := e.abort(ctx, mv, src, dst, "plan paused or cancelled", status); err != nil {
			return err
		}
		e.recordMove(p, i, status, "", 0)
		return nil
	}
	attempts := e.bumpAttempts(moveID)
	if Retryable(err) && attempts < e.cfg.MoveAttempts {
		e.lg.Warn("move failed; will resume", "slot", pm.Slot, "move", moveID, "attempt", attempts, "err", err)
		sleep(ctx, jitter(e.cfg.Backoff<<min(attempts, 6)))
		return nil
	}
	e.clearAttempts(moveID)
	e.lg.Error("move failed; aborting and pausing the plan", "slot", pm.Slot, "move", moveID, "err", err)
	if aerr := e.abort(ctx, mv, src, dst, err.Error(), MoveFailed); aerr != nil {
		return aerr
	}
	reason := fmt.Sprintf("move of slot %d (%s -> %s) failed and was aborted: %v; fix it and slotctl resume, or cancel", pm.Slot, pm.From, pm.To, err)
	e.recordMove(p, i, MoveFailed, err.Error(), 0)
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

// planGuard aborts the moves of a plan, those not yet fencing, when the
// plan stops applying with abort requested (slotctl cancel --abort).
type planGuard struct {
	mu    sync.Mutex
	moves map[*atomic.Bool]context.CancelFunc
	fired bool // abort requested: moves added later are cancelled at once
	// halted is set once the plan is seen not applying: no new move of it
	// may start.
	halted atomic.Bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// guardPlan starts watching plan id; call stop when its moves ended.
func (e *Executor) guardPlan(ctx context.Context, planID string) *planGuard {
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
			p, err := e.ctl.Get(ctx, planID)
			if err != nil {
				continue
			}
			if p.State != StateApplying {
				g.halted.Store(true)
			}
			if p.State != StateApplying && p.AbortCurrent {
				e.lg.Info("plan stopped; aborting the moves in flight that are not fencing", "plan", planID, "state", p.State)
				g.fire()
				return
			}
			if p.State != StateApplying {
				// Finish the moves; the loop sees the state afterwards.
				e.notify()
			}
		}
	}()
	return g
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

// transfer runs the protocol for mv without pause watching.
func (e *Executor) transfer(ctx context.Context, mv directory.Move, src, dst storeEnd, step Step) (Result, error) {
	var fencing atomic.Bool
	return e.transferWith(ctx, mv, src, dst, step, false, &fencing)
}

func (e *Executor) transferWith(ctx context.Context, mv directory.Move, src, dst storeEnd, step Step, fresh bool, fencing *atomic.Bool) (Result, error) {
	prog := &MoveProgress{PlanID: mv.PlanID, MoveID: mv.MoveID, Slot: mv.Slot.Int(), From: mv.From, To: mv.To, Phase: string(mv.Phase), Started: time.Now()}
	e.mu.Lock()
	e.inflight[mv.MoveID] = prog
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.inflight, mv.MoveID)
		e.mu.Unlock()
	}()
	var fencedAt time.Time
	j := &journal{e: e, mv: mv, prog: prog, fencing: fencing}
	t := &Transfer{
		Slot: mv.Slot, MoveID: mv.MoveID, Source: src.c, Target: dst.c,
		Rate: e.rate(ctx), Journal: j, Verify: e.cfg.Verify, Fresh: fresh,
		Progress: func(b, k int) {
			e.mu.Lock()
			prog.Bytes += int64(b)
			prog.Keys += int64(k)
			e.mu.Unlock()
			e.m.bytesMoved.Add(float64(b))
			e.m.keysMoved.Add(float64(k))
		},
		Fenced: func() { fencedAt = time.Now() },
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

func (j *journal) Fencing(ctx context.Context) error {
	j.fencing.Store(true)
	j.setPhase(string(directory.PhaseFenced))
	_, err := j.e.dir.AdvanceMove(ctx, j.mv.Slot, j.mv.MoveID, directory.PhaseFenced)
	return err
}

func (j *journal) Commit(ctx context.Context, res Result) (uint64, error) {
	v, err := j.e.dir.CommitMoveCopied(ctx, j.mv.Slot, j.mv.MoveID, "mover/"+j.e.cfg.Name, directory.Copied{Bytes: res.Bytes, Keys: res.Keys})
	j.committedAt = time.Now()
	return v, err
}

// committed queues the source's clean-up and logs the move.
func (e *Executor) committed(ctx context.Context, mv directory.Move, src storeEnd, res Result) {
	e.m.moves.WithLabelValues("committed").Inc()
	e.clearAttempts(mv.MoveID)
	e.lg.Info("slot moved", "slot", mv.Slot.Int(), "from", mv.From, "to", mv.To, "version", res.Version,
		"bytes", res.Bytes, "keys", res.Keys, "reason", mv.Reason, "plan", mv.PlanID)
	e.mu.Lock()
	e.cleanups = append(e.cleanups,
		cleanup{addr: src.addr, slot: mv.Slot, moveID: mv.MoveID},
		cleanup{addr: src.addr, slot: mv.Slot, moveID: mv.MoveID, version: res.Version, drop: true})
	e.mu.Unlock()
}

// abort undoes a move before commit. A source that may be fenced must be
// unfenced first, so abort retries until it answers (or leadership ends):
// recording the abort while the source stays fenced would leave the slot
// without a writer.
func (e *Executor) abort(ctx context.Context, mv directory.Move, src, dst storeEnd, reason string, status MoveStatus) error {
	cur, err := e.dir.Snapshot(ctx)
	if err != nil {
		return err
	}
	phase := mv.Phase
	if m, ok := cur.Move(mv.Slot); ok && m.MoveID == mv.MoveID {
		phase = m.Phase
	} else if !ok {
		return nil // already settled
	}
	backoff := e.cfg.Backoff
	for {
		targetErr, err := Abort(ctx, mv.Slot, mv.MoveID, src.c, dst.c)
		if err == nil {
			if targetErr != nil {
				e.queue(cleanup{addr: dst.addr, slot: mv.Slot, moveID: mv.MoveID, drop: true})
			}
			break
		}
		if phase != directory.PhaseFenced {
			// Never fenced: the source keeps serving; its capture is ended
			// later, and the target's copy dropped.
			e.queue(cleanup{addr: src.addr, slot: mv.Slot, moveID: mv.MoveID})
			e.queue(cleanup{addr: dst.addr, slot: mv.Slot, moveID: mv.MoveID, drop: true})
			break
		}
		e.lg.Warn("cannot unfence the source yet; retrying", "slot", mv.Slot.Int(), "node", src.id, "err", err)
		if !sleep(ctx, jitter(backoff)) {
			return ctx.Err()
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	if status == MovePending {
		status = "" // back to pending: no result
	}
	if _, err := e.dir.AbortMoveAs(ctx, mv.Slot, mv.MoveID, reason, "mover/"+e.cfg.Name, string(status)); err != nil && !errors.Is(err, directory.ErrNotFound) {
		return err
	}
	e.m.moves.WithLabelValues("aborted").Inc()
	e.lg.Warn("move aborted", "slot", mv.Slot.Int(), "from", mv.From, "to", mv.To, "move", mv.MoveID, "reason", reason)
	return nil
}

// recentCommits is how much history a new leader reads back for copies
// left behind by the previous one.
const recentCommits = 1000

// requeueDrops runs at the start of a term. The clean-ups a previous
// leader queued died with it, so the sources of the moves committed in the
// recent history are asked again to end their captures and drop their
// copies, and the targets of aborted moves to drop their partial copies. A node answers a drop that is done, moot (it owns the slot again)
// or superseded (a newer move imports the slot) without deleting anything
// it should keep, so asking twice is harmless.
func (e *Executor) requeueDrops(ctx context.Context) {
	hist, err := e.dir.History(ctx, recentCommits)
	if err != nil {
		e.lg.Warn("read history for clean-ups left by the previous leader", "err", err)
		return
	}
	snap, err := e.dir.Snapshot(ctx)
	if errors.Is(err, directory.ErrNotBootstrapped) {
		return // a new cluster: no move ever ran
	}
	if err != nil {
		e.lg.Warn("read table for clean-ups left by the previous leader", "err", err)
		return
	}
	n := 0
	for _, h := range hist {
		if _, busy := snap.Move(h.Slot); busy {
			continue // the move in flight cleans up after itself
		}
		var holder string // the node that may hold a copy it should not
		switch h.Kind {
		case directory.ChangeMoveCommit:
			holder = h.From
		case directory.ChangeMoveAbort:
			holder = h.To // a partial copy
		default:
			continue
		}
		nd, ok := snap.Node(holder)
		if !ok || nd.State == directory.NodeDown || snap.Owner(h.Slot) == holder {
			continue // removed or away (a down node would stall the clean-up loop), or owner again
		}
		if h.Kind == directory.ChangeMoveCommit {
			e.queue(cleanup{addr: nd.Addr, slot: h.Slot, moveID: h.MoveID})
			e.queue(cleanup{addr: nd.Addr, slot: h.Slot, moveID: h.MoveID, version: h.Version, drop: true})
		} else {
			e.queue(cleanup{addr: nd.Addr, slot: h.Slot, moveID: h.MoveID, drop: true})
		}
		n++
	}
	if n > 0 {
		e.lg.Info("asked sources of recent moves to drop their copies again", "moves", n)
	}
}

func (e *Executor) queue(c cleanup) {
	e.mu.Lock()
	e.cleanups = append(e.cleanups, c)
	e.mu.Unlock()
}

// cleanupLoop retries store-side clean-ups every few hundred milliseconds.
func (e *Executor) cleanupLoop(ctx context.Context) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		e.mu.Lock()
		todo := e.cleanups
		e.cleanups = nil
		e.mu.Unlock()
		var left []cleanup
		for _, c := range todo {
			if err := e.runCleanup(ctx, c); err != nil {
				left = append(left, c)
			}
		}
		if len(left) > 0 {
			e.mu.Lock()
			e.cleanups = append(left, e.cleanups...)
			e.mu.Unlock()
		}
	}
}

func (e *Executor) runCleanup(ctx context.Context, c cleanup) error {
	cl, err := e.cfg.Stores.Client(c.addr)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := uint32(c.slot.Int())
	if c.drop {
		_, err = cl.DropSlot(cctx, &slotdv1.DropSlotRequest{Slot: s, Version: c.version, MoveId: c.moveID})
		if status.Code(err) == codes.FailedPrecondition {
			// The node owns the slot again, or a newer move is importing it
			// (and cleared the old copy when it began): nothing to drop.
			e.lg.Info("drop no longer needed", "node", c.addr, "slot", c.slot.Int(), "move", c.moveID, "reason", err)
			err = nil
		}
	} else {
		_, err = cl.EndCapture(cctx, &slotdv1.EndCaptureRequest{Slot: s, MoveId: c.moveID})
		if isGone(err) {
			err = nil
		}
	}
	return err
}

// recordMove notes one move's result in the cached plan, for the
// scheduler. The directory has it already: the transaction that committed
// or aborted the move wrote it.
func (e *Executor) recordMove(p *Plan, i int, st MoveStatus, msg string, copied int64) {
	if p == nil || i < 0 || i >= len(p.Moves) {
		return
	}
	e.recMu.Lock()
	defer e.recMu.Unlock()
	m := &p.Moves[i]
	m.Status, m.Error, m.Copied, m.Finished = st, msg, copied, time.Now().UTC()
}

// skipped records move i of p as skipped, with why: no transaction of a
// move writes that.
func (e *Executor) skipped(ctx context.Context, p *Plan, i int, slot slots.Slot, why string) error {
	err := e.dir.RecordResult(ctx, p.ID, directory.MoveResult{Index: i, Slot: slot.Int(), Status: directory.ResultSkipped, Error: why})
	if err != nil {
		return err
	}
	e.m.moves.WithLabelValues("skipped").Inc()
	e.recordMove(p, i, MoveSkipped, why, 0)
	return nil
}

// setState rewrites plan p's record with edit, which also says what
// becomes of its run key, and keeps the cached p in step.
func (e *Executor) setState(ctx context.Context, p *Plan, edit func(q *Plan) directory.Run) error {
	e.staleMu.Lock()
	e.selfWrites[p.ID]++
	e.staleMu.Unlock()
	err := e.ctl.updateRun(ctx, p.ID, func(q *Plan) (directory.Run, error) { return edit(q), nil })
	if err != nil {
		// The write may not have happened: read the plan again.
		e.staleMu.Lock()
		e.selfWrites[p.ID] = 0
		e.stale[p.ID] = true
		e.staleMu.Unlock()
		return err
	}
	e.recMu.Lock()
	defer e.recMu.Unlock()
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

// bumpAttempts counts a failed try of a move; the count outlives the step
// (and a change of leader within this process).
func (e *Executor) bumpAttempts(moveID string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.attempts[moveID]++
	return e.attempts[moveID]
}

func (e *Executor) clearAttempts(moveID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.attempts, moveID)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// jitter spreads retries of many slotd over [d/2, d).
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}
