package mover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// Errors of the control API, for callers to branch on (the gRPC layer maps
// them to codes).
var (
	// ErrInvalid: the request is malformed; nothing changed.
	ErrInvalid = errors.New("mover: invalid request")
	// ErrNotFound: no such plan or node.
	ErrNotFound = errors.New("mover: not found")
	// ErrPrecondition: the request is well formed, but the cluster's state
	// refuses it (another plan active, plan stale, wrong plan state).
	ErrPrecondition = errors.New("mover: precondition failed")
	// ErrBalanced: a request with SkipIfBalanced found nothing to do; no
	// plan was stored.
	ErrBalanced = errors.New("mover: balanced, nothing to do")
)

// SizeSource reports every slot's size and each node's keys, bytes and
// writes per second as its store answers them now, for planning on what
// the stores hold and estimating time. The executor's store pool
// implements it by asking each node (StorePool.SlotStats); nil means
// sizes are unknown.
type SizeSource interface {
	SlotStats(ctx context.Context, snap *directory.Snapshot) (*Stats, error)
}

// DefaultThrottle is the donor rate when the operator set none: start at
// 50 MB/s, and raise it while the clients' p99 latency stays where it
// should.
const DefaultThrottle = 50_000_000

// perMoveEstimate is the fixed cost of one move in time estimates.
const perMoveEstimate = 5 * time.Millisecond

// Control is the mover's API for operators: plan, apply, pause, resume,
// cancel, roll back, throttle, status. It only reads and writes the
// directory, so every slotd replica serves it; the elected executor acts on
// what it records. Safe for concurrent use.
type Control struct {
	dir   *directory.Directory
	sizes SizeSource
	lg    *slog.Logger
	now   func() time.Time
	keep  int // plans kept beyond the active one
	loads LoadSource
	// balanceBy is the default mode of a plan request.
	balanceBy planner.BalanceBy
	// rollbackWait bounds Rollback's wait for a stopped plan's moves.
	rollbackWait time.Duration

	// decoded keeps the last decoded form of each plan record: a plan of
	// thousands of moves takes tens of milliseconds to decode, and
	// `slotctl apply --wait` asks for it three times a second while the
	// record itself changes only on state changes (progress is a separate
	// small record).
	decodedMu sync.Mutex
	decoded   map[string]decodedPlan
	states    map[string]planState // by plan id, for Active
	known     plansKnown           // how complete states is
	// plansSeen is how many plans (progress records not counted) this
	// process last saw, plus those it stored since: prune reads the ids
	// only when it may be over the limit. Other replicas' plans make it
	// low; they prune on their own stores.
	plansSeen int

	// watched is the table the leading executor of this process follows
	// (its latest), when there is one: `slotctl move` plans on it when it
	// is at the version etcd has, instead of reading the whole table.
	watched atomic.Pointer[atomic.Pointer[directory.Snapshot]]
	// exec is this process's executor, if any: while it leads, `slotctl
	// move` hands it the plan to store and begin at once (onemove.go).
	exec atomic.Pointer[Executor]
}

// table returns the table at the directory's current version: the watched
// one when it is that version (a read of the version key), else a read.
func (c *Control) table(ctx context.Context) (*directory.Snapshot, error) {
	if w := c.watched.Load(); w != nil {
		if s := w.Load(); s != nil {
			v, err := c.dir.Version(ctx)
			if err != nil {
				return nil, err
			}
			if s = w.Load(); s != nil && s.Version == v {
				return s, nil
			}
		}
	}
	return c.dir.Snapshot(ctx)
}

type decodedPlan struct {
	raw  []byte
	plan *Plan
}

// ControlConfig configures a Control.
type ControlConfig struct {
	Directory *directory.Directory // required
	Sizes     SizeSource           // optional
	Logger    *slog.Logger
	Now       func() time.Time
	// KeepPlans is how many plans that are not applying or paused are
	// kept (the newest; older ones are deleted as new plans are stored):
	// every `slotctl move` and `slotctl plan` stores one, and status reads
	// them all. Default 200.
	KeepPlans int
	// Loads gives plans the nodes' measured load (nil: none, so auto plans
	// balance slot counts and bytes or ops are refused).
	Loads LoadSource
	// BalanceBy is what a plan balances when its request does not say
	// (zero value: auto).
	BalanceBy planner.BalanceBy
	// RollbackWait bounds how long Rollback waits for the moves a stopped
	// plan still has in flight. Default 30s.
	RollbackWait time.Duration
}

// defaultKeepPlans is ControlConfig.KeepPlans' default.
const defaultKeepPlans = 200

// NewControl returns a Control over cfg.Directory.
func NewControl(cfg ControlConfig) (*Control, error) {
	if cfg.Directory == nil {
		return nil, fmt.Errorf("%w: control needs a directory", ErrInvalid)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeepPlans == 0 {
		cfg.KeepPlans = defaultKeepPlans
	}
	if cfg.KeepPlans < 1 {
		return nil, fmt.Errorf("%w: KeepPlans %d must be at least 1", ErrInvalid, cfg.KeepPlans)
	}
	if _, err := planner.ParseBalanceBy(string(cfg.BalanceBy)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if cfg.RollbackWait == 0 {
		cfg.RollbackWait = defaultRollbackWait
	}
	return &Control{dir: cfg.Directory, sizes: cfg.Sizes, lg: cfg.Logger, now: cfg.Now, keep: cfg.KeepPlans,
		loads: cfg.Loads, balanceBy: cfg.BalanceBy, rollbackWait: cfg.RollbackWait}, nil
}

// PlanRequest asks for a plan.
type PlanRequest struct {
	Edits    Edits
	MaxMoves int // 0: as many as balance needs
	Operator string
	Reason   string
	// BalanceBy is what to balance ("": the Control's default), Tolerance
	// the dead band (0: 10%), MaxBytes the bytes budget (0: none); see
	// planner.Input.
	BalanceBy planner.BalanceBy
	Tolerance float64
	MaxBytes  int64
	// SkipIfBalanced stores no plan when the planner finds nothing to do
	// (planner.Plan.Balanced): Propose returns ErrBalanced instead. The
	// automatic balancer sets it: its decision reads the load reports,
	// the plan the stores' answers of now, and when those say the cluster
	// is balanced there is no plan to record.
	SkipIfBalanced bool
}

// Propose computes a plan for the current table with req's node edits
// applied in imagination, stores it as proposed and returns it. Nothing in
// the slot table changes.
func (c *Control) Propose(ctx context.Context, req PlanRequest) (*Plan, error) {
	snap, err := c.dir.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	nodes, err := applyEdits(snap, req.Edits)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if req.MaxMoves < 0 {
		return nil, fmt.Errorf("plan: %w: max moves %d is negative", ErrInvalid, req.MaxMoves)
	}
	in := planner.Input{Version: snap.Version, Owners: snap.Owners(), Nodes: nodes, PerMove: perMoveEstimate}
	if len(snap.Moves) > 0 {
		busy := &slots.Set{}
		for _, m := range snap.Moves {
			busy.Add(m.Slot)
		}
		in.Busy = busy
	}
	if in.Throttle, err = c.throttle(ctx); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	in.BalanceBy, in.Tolerance, in.MaxBytes, in.MaxMoves = req.BalanceBy, req.Tolerance, req.MaxBytes, req.MaxMoves
	if in.BalanceBy == "" {
		in.BalanceBy = c.balanceBy
	}
	var sizesUnknown []string
	var stats *Stats
	var unknown *sizesUnknownError
	if c.sizes != nil {
		stats, err = c.sizes.SlotStats(ctx, snap)
		if err != nil {
			c.lg.Warn("slot sizes unavailable; planning without them", "err", err)
			if errors.As(err, &unknown) {
				sizesUnknown = unknown.Nodes
			}
		}
		if stats != nil {
			in.SlotBytes = stats.Bytes
		}
	}
	var filled, rated []string
	if stats != nil {
		rated = stats.Rated
	}
	if c.loads != nil {
		// The planner never balances blind where the stores can be asked:
		// what they answered now beats reports that are late or missing.
		in.Loads, filled = measured(c.loads.NodeLoads(c.now()), stats, snap.Counts(), in.BalanceBy)
	}
	pp, err := planner.Compute(in)
	if err != nil {
		if errors.Is(err, planner.ErrNoLoad) {
			return nil, fmt.Errorf("plan: %w: %v", ErrPrecondition, err)
		}
		if errors.Is(err, planner.ErrInvalid) {
			return nil, fmt.Errorf("plan: %w: %v", ErrInvalid, err)
		}
		return nil, fmt.Errorf("plan: %w", err)
	}
	if note := measuredNote(filled, rated, unknown); note != "" {
		pp.Note = strings.TrimPrefix(pp.Note+"; "+note, "; ")
	}
	if req.SkipIfBalanced && pp.Balanced && len(pp.Moves) == 0 {
		return nil, fmt.Errorf("plan: %w: %s", ErrBalanced, pp.Note)
	}
	now := c.now().UTC()
	p := &Plan{
		ID: pp.ID, BaseVersion: pp.BaseVersion, State: StateProposed,
		Operator: req.Operator, Reason: req.Reason, Created: now, Updated: now,
		Edits: req.Edits, Nodes: pp.Nodes, Throttle: in.Throttle,
		BalanceBy: pp.BalanceBy, Tolerance: pp.Tolerance, Note: pp.Note,
		Unknown: pp.Unknown, HotSpots: pp.HotSpots, Blocked: pp.Blocked, SizesUnknown: sizesUnknown,
	}
	moves := pp.Moves
	if req.MaxMoves > 0 && len(moves) > req.MaxMoves {
		moves = moves[:req.MaxMoves]
	}
	for _, m := range moves {
		p.Moves = append(p.Moves, PlannedMove{Slot: m.Slot, From: m.From, To: m.To, Bytes: m.Bytes, Reason: m.Reason, Status: MovePending})
		p.TotalBytes += m.Bytes
	}
	if len(moves) != len(pp.Moves) {
		p.ID = boundID(fmt.Sprintf("%s-first%d", pp.ID, len(moves)))
		p.Nodes = afterMoves(snap, nodes, p.Moves, in.SlotBytes)
	}
	p.Estimate = planner.Estimate(p.TotalBytes, len(p.Moves), in.Throttle, perMoveEstimate)
	if err := c.store(ctx, p); err != nil {
		return nil, err
	}
	c.lg.Info("plan proposed", "plan", p.ID, "moves", len(p.Moves), "bytes", p.TotalBytes, "base_version", p.BaseVersion, "operator", req.Operator)
	return p, nil
}

// Apply starts a proposed plan: it checks the plan still fits the table,
// makes its node edits and marks it applying; the executor takes it from
// there. One plan at a time.
func (c *Control) Apply(ctx context.Context, id, operator string) (*Plan, error) {
	plans, err := c.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	i := slices.IndexFunc(plans, func(q *Plan) bool { return q.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("apply: %w: no plan %q; list plans with slotctl plans list", ErrNotFound, id)
	}
	p := plans[i]
	if p.State != StateProposed {
		return nil, fmt.Errorf("apply: %w: plan %s is %s; only a proposed plan can be applied", ErrPrecondition, id, p.State)
	}
	if act := activeOf(plans); act != nil {
		return nil, fmt.Errorf("apply: %w: plan %s is %s; wait for it, or slotctl cancel it first", ErrPrecondition, act.ID, act.State)
	}
	snap, err := c.dir.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	nodes, err := applyEdits(snap, p.Edits)
	if err != nil {
		return nil, fmt.Errorf("apply plan %s: %w", id, err)
	}
	if err := planner.Check(toPlannerPlan(p), 0, plannerInput(snap, nodes)); err != nil {
		return nil, fmt.Errorf("apply: %w: %v", ErrPrecondition, err)
	}
	prev := map[string]int{}
	for id := range p.Edits.Weights {
		if n, ok := snap.Node(id); ok {
			prev[id] = n.Weight
		}
	}
	if err := c.makeEdits(ctx, snap, p.Edits, operator, "plan "+id); err != nil {
		return nil, fmt.Errorf("apply plan %s: %w", id, err)
	}
	var applied *Plan
	err = c.updateRun(ctx, id, func(q *Plan) (directory.Run, error) {
		if q.State != StateProposed {
			return 0, fmt.Errorf("%w: plan %s became %s meanwhile", ErrPrecondition, id, q.State)
		}
		q.State, q.Operator, q.Error = StateApplying, operator, ""
		if len(prev) > 0 {
			q.PrevWeights = prev
		}
		applied = q
		return directory.RunStart, nil
	})
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	c.lg.Info("plan applied", "plan", id, "moves", len(p.Moves), "operator", operator)
	return applied, nil
}

// makeEdits registers added nodes, drains and reweights, each idempotent.
func (c *Control) makeEdits(ctx context.Context, snap *directory.Snapshot, e Edits, by, why string) error {
	for _, n := range e.Add {
		if _, ok := snap.Node(n.ID); ok {
			continue
		}
		w := n.Weight
		if w == 0 {
			w = 1
		}
		if _, err := c.dir.RegisterNode(ctx, directory.Node{ID: n.ID, Addr: n.Addr, Zone: n.Zone, Weight: w}); err != nil {
			return fmt.Errorf("add node %s: %w", n.ID, err)
		}
	}
	for _, id := range e.Drain {
		if n, ok := snap.Node(id); ok && n.Draining {
			continue
		}
		if _, err := c.dir.Drain(ctx, id, why, by); err != nil {
			return fmt.Errorf("drain node %s: %w", id, err)
		}
	}
	for _, id := range sortedKeys(e.Weights) {
		if n, ok := snap.Node(id); ok && n.Weight == e.Weights[id] {
			continue
		}
		if _, err := c.dir.SetWeight(ctx, id, e.Weights[id], by); err != nil {
			return fmt.Errorf("set weight of %s: %w", id, err)
		}
	}
	return nil
}

// Pause stops an applying plan after the move in flight (or aborting it,
// with abortCurrent).
func (c *Control) Pause(ctx context.Context, id string, abortCurrent bool, operator string) (*Plan, error) {
	return c.transition(ctx, "pause", id, func(p *Plan) (directory.Run, error) {
		if p.State != StateApplying {
			return 0, fmt.Errorf("%w: plan %s is %s; only an applying plan can be paused", ErrPrecondition, id, p.State)
		}
		p.State, p.AbortCurrent = StatePaused, abortCurrent
		return directory.RunStop, nil
	})
}

// Resume continues a paused plan, after checking it still fits the table.
func (c *Control) Resume(ctx context.Context, id, operator string) (*Plan, error) {
	p, err := c.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if p.State != StatePaused {
		return nil, fmt.Errorf("resume: %w: plan %s is %s; only a paused plan can be resumed", ErrPrecondition, id, p.State)
	}
	snap, err := c.dir.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if err := checkRemaining(p, snap); err != nil {
		return nil, fmt.Errorf("resume: %w: %v", ErrPrecondition, err)
	}
	return c.transition(ctx, "resume", id, func(p *Plan) (directory.Run, error) {
		if p.State != StatePaused {
			return 0, fmt.Errorf("%w: plan %s is %s", ErrPrecondition, id, p.State)
		}
		p.State, p.AbortCurrent, p.Error = StateApplying, false, ""
		return directory.RunStart, nil
	})
}

// Cancel stops a plan for good: the executor finishes a move that is
// already fenced, aborts one that is not, and runs no other.
func (c *Control) Cancel(ctx context.Context, id, operator string) (*Plan, error) {
	return c.transition(ctx, "cancel", id, func(p *Plan) (directory.Run, error) {
		if p.State.final() {
			return 0, fmt.Errorf("%w: plan %s is already %s", ErrPrecondition, id, p.State)
		}
		p.State, p.AbortCurrent = StateCancelled, true
		return directory.RunStop, nil
	})
}

func (c *Control) transition(ctx context.Context, op, id string, edit func(*Plan) (directory.Run, error)) (*Plan, error) {
	if err := c.updateRun(ctx, id, edit); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	c.lg.Info("plan "+op, "plan", id)
	return c.Get(ctx, id)
}

// SetThrottle stores the donor byte rate; the executor applies it to the
// move in flight within a second.
func (c *Control) SetThrottle(ctx context.Context, bytesPerSec int64, operator string) error {
	if bytesPerSec < 0 {
		return fmt.Errorf("throttle: %w: %d bytes/s is negative", ErrInvalid, bytesPerSec)
	}
	if err := c.dir.SetThrottle(ctx, bytesPerSec); err != nil {
		return fmt.Errorf("throttle: %w", err)
	}
	c.lg.Info("throttle set", "bytes_per_second", bytesPerSec, "operator", operator)
	return nil
}

// Throttle returns the donor rate in force (DefaultThrottle when unset; 0
// means unlimited).
func (c *Control) Throttle(ctx context.Context) (int64, error) { return c.throttle(ctx) }

func (c *Control) throttle(ctx context.Context) (int64, error) {
	v, ok, err := c.dir.Throttle(ctx)
	if err != nil {
		return 0, err
	}
	if !ok {
		return DefaultThrottle, nil
	}
	return v, nil
}
