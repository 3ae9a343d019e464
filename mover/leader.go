package mover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"golang.org/x/sync/errgroup"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/backoff"
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
	// MoveRetryFor is how long a move whose store or etcd is away is
	// retried (from its recorded phase, with backoff) before it is aborted
	// and its plan paused: an etcd leader election or a store restart is
	// routine. Default DefaultMoveRetryFor.
	MoveRetryFor time.Duration
	// Verify compares source and target checksums inside the fence.
	// It costs a scan of the slot on both nodes and lengthens the write
	// pause, so it is off by default; every key's slot is always checked.
	Verify bool
	// Backoff is the first retry delay (doubling, jittered, capped at 5s).
	// Default 100ms.
	Backoff time.Duration
	// Parallelism caps how many moves of a plan are in flight at once; a
	// move that ends makes room for the next pending one. Default
	// DefaultParallelism; 1 is strictly one move at a time. At every
	// value the donor rule holds: a donor copies at most one slot
	// holding data at a time (see SmallSlotBytes), so a higher value
	// adds near-empty slots and other donors to the window, never a
	// second data copy from one donor. The throttle stays a per-donor
	// rate (a store's export token bucket is per node). At most
	// MaxParallelism.
	Parallelism int
	// SmallSlotBytes is the size at or below which a slot counts as
	// near-empty: its copy is one small batch, so several share the
	// window. A slot's size is the larger of the plan's estimate and what
	// its donor reports when the window starts (a donor that does not
	// answer makes its slots count as holding data). Default 256 KiB;
	// negative: every slot holding any byte is data.
	SmallSlotBytes int64
	// DisableLiveness stops the leader from running the directory's
	// liveness loop (which marks nodes down); tests whose nodes send no
	// heartbeats set it.
	DisableLiveness bool
	// LeaderParts run while this executor leads, each with a context that
	// ends when leadership does (the balancer plugs in here). An error
	// from one ends the term (the executor campaigns again).
	LeaderParts []LeaderPart
}

// LeaderPart is work that runs only on the mover's leader.
type LeaderPart interface {
	Run(ctx context.Context) error
}

// DefaultMoveRetryFor is ExecutorConfig.MoveRetryFor's default.
const DefaultMoveRetryFor = 30 * time.Second

// MaxParallelism bounds ExecutorConfig.Parallelism.
const MaxParallelism = 64

// DefaultParallelism is ExecutorConfig.Parallelism's default: the window
// of moves in flight, of which at most one per donor copies a slot
// holding data. 12 hides the per-move round trips of near-empty slots
// (their directory writes are group-committed) with the cutover pause
// p99 within 20 ms: bench/cmd/cluster's item 3 on a quiet machine (load
// 1.5-2), 3 -> 4 nodes, 200,000 keys: at 16, 4.23 s (auto plan) and
// 6.31 s (4,096 slots) with the pause p99 <= 25.6 ms; at 12, 4.87 s and
// 6.87 s with <= 18.1 ms; at 8, 5.68 s and 8.38 s with <= 12.8 / 18.1 ms
// (Redis 7.8-12.1 s). More fences at once queue their commits in etcd,
// and the pause is fence to commit.
const DefaultParallelism = 12

// defaultSmallSlotBytes is ExecutorConfig.SmallSlotBytes's default: a
// quarter of the default export batch. A window of near-empty slots
// then asks a donor for at most DefaultParallelism x 256 KiB of scans at
// once, and their bytes still pass the donor's throttle.
const defaultSmallSlotBytes = 256 << 10

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

// Executor runs plans while it holds the cluster's mover leadership: a
// window of up to Parallelism moves, of which each donor copies at most
// one slot holding data at a time (window.go). Every slotd runs one;
// exactly one leads. Safe for concurrent use.
//
// Its parts: the election, the parts a leader runs and the throttle
// (leader.go); the plan loop, which decides what runs next (planloop.go),
// on the plans its planBook keeps (planbook.go); the window of moves in
// flight (window.go); each move a runningMove (move.go, abort.go); the
// plan's guard (guard.go); the store clean-ups after a move (cleanup.go).
type Executor struct {
	cfg   ExecutorConfig
	dir   *directory.Directory
	ctl   *Control
	lg    *slog.Logger
	m     *metrics
	clean *cleaner

	leader   atomic.Bool
	throttle atomic.Int64 // donor rate in force; -1 before the first read
	// latest is the newest table seen by the leader's watch; moves check
	// against it and BeginMove re-checks against etcd.
	latest atomic.Pointer[directory.Snapshot]
	// term counts the terms this executor led; leadCtx is the current
	// term's context (nil when not leading), for work a request starts
	// that must end with the term (onemove.go).
	term    atomic.Uint64
	leadCtx atomic.Pointer[context.Context]

	plans *planBook   // the plans run, as last read
	gates *donorGates // one data copy per donor at a time

	mu       sync.Mutex               // guards inflight
	inflight map[string]*MoveProgress // by move id

	wake chan struct{} // plans or throttle changed

	// hook, set by scripted tests only, is called at points of a move:
	// "begun" (recorded in the directory, phase copy) and "fenced" (the
	// fenced phase recorded, the source not fenced yet).
	hook func(event string, mv directory.Move, g *planGuard)
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
	if cfg.MoveRetryFor == 0 {
		cfg.MoveRetryFor = DefaultMoveRetryFor
	}
	if cfg.MoveRetryFor < 0 {
		return nil, fmt.Errorf("%w: move retry time %s is negative", ErrInvalid, cfg.MoveRetryFor)
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.Parallelism == 0 {
		cfg.Parallelism = DefaultParallelism
	}
	if cfg.SmallSlotBytes == 0 {
		cfg.SmallSlotBytes = defaultSmallSlotBytes
	}
	if cfg.Parallelism < 1 || cfg.Parallelism > MaxParallelism {
		return nil, fmt.Errorf("%w: parallelism %d is not in 1-%d", ErrInvalid, cfg.Parallelism, MaxParallelism)
	}
	lg := cfg.Logger.With("mover", cfg.Name)
	e := &Executor{cfg: cfg, dir: cfg.Directory, ctl: cfg.Control, lg: lg, m: newMetrics(cfg.Registerer),
		clean: newCleaner(cfg.Stores, lg), wake: make(chan struct{}, 1), inflight: map[string]*MoveProgress{}}
	e.throttle.Store(-1)
	e.plans = newPlanBook(cfg.Control, cfg.Directory, lg, e.m)
	e.gates = newDonorGates()
	// While it leads, the table it watches spares the control's `slotctl
	// move` a read of the whole table (Control.table checks its version).
	cfg.Control.watched.Store(&e.latest)
	cfg.Control.exec.Store(e)
	return e, nil
}

// backoff returns a fresh retry schedule starting at cfg.Backoff.
func (e *Executor) backoff() *backoff.Backoff {
	return &backoff.Backoff{Initial: e.cfg.Backoff, Max: 5 * time.Second, Jitter: 0.5}
}

// isLeader reports whether this executor currently leads.
func (e *Executor) isLeader() bool { return e.leader.Load() }

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
	b := e.backoff()
	for ctx.Err() == nil {
		err := e.campaign(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			e.lg.Warn("mover election failed; retrying", "err", err)
		}
		if !b.Sleep(ctx) {
			return nil
		}
	}
	return nil
}

// campaign waits to be elected through etcd's concurrency.Election, leads
// until the session or ctx ends, then resigns.
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
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
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
// clean-ups (the stores' reconciliation is the guarantee), 4. liveness,
// 5. the LeaderParts; errgroup waits for all of them.
func (e *Executor) lead(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	e.latest.Store(nil)
	e.plans.newTerm()
	e.term.Add(1)
	e.leadCtx.Store(&gctx)
	defer e.leadCtx.Store(nil)
	g.Go(func() error {
		defer e.ctl.planWatchEnded()
		return ignoreCanceled(e.dir.WatchPlans(gctx, e.planWritten))
	})
	g.Go(func() error {
		return ignoreCanceled(e.dir.Watch(gctx, 0, func(s *directory.Snapshot) error {
			e.latest.Store(s)
			e.m.observeTable(s)
			return nil
		}))
	})
	g.Go(func() error {
		return ignoreCanceled(e.dir.WatchThrottle(gctx, func(bps int64, set bool) {
			if !set {
				bps = DefaultThrottle // what Control.Throttle says then
			}
			e.setThrottle(gctx, bps)
		}))
	})
	g.Go(func() error { return e.clean.Run(gctx) })
	if !e.cfg.DisableLiveness {
		g.Go(func() error { return ignoreCanceled(e.dir.RunLiveness(gctx)) })
	}
	for _, part := range e.cfg.LeaderParts {
		g.Go(func() error { return ignoreCanceled(part.Run(gctx)) })
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

func (e *Executor) notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// setThrottle applies a new donor rate, to the moves in flight too, on the
// leader's context: its store calls end with leadership.
func (e *Executor) setThrottle(ctx context.Context, bps int64) {
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
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	snap := e.latest.Load()
	if snap == nil {
		var err error
		if snap, err = e.dir.Snapshot(ctx); err != nil {
			return
		}
	}
	for id := range donors {
		n, ok := snap.Node(id)
		if !ok {
			continue
		}
		if c, err := e.cfg.Stores.client(n.Addr); err == nil {
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
