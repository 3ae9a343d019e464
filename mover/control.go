package mover

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

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
)

// SizeSource reports the size of every slot, for planning cheapest first
// and estimating time. The executor's store pool implements it by asking
// each node; nil means sizes are unknown.
type SizeSource interface {
	SlotSizes(ctx context.Context, snap *directory.Snapshot) ([]int64, error)
}

// DefaultThrottle is the donor rate when the operator set none: seed 002's
// "start at 50 MB/s and raise it while watching p99".
const DefaultThrottle = 50_000_000

// PerMoveEstimate is the fixed cost of one move in time estimates.
const PerMoveEstimate = 5 * time.Millisecond

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

	// decoded keeps the last decoded form of each plan record: a plan of
	// thousands of moves takes tens of milliseconds to decode, and
	// `slotctl apply --wait` asks for it three times a second while the
	// record itself changes only on state changes (progress is a separate
	// small record).
	decodedMu sync.Mutex
	decoded   map[string]decodedPlan
	states    map[string]planState // by plan id, for Active
	// plansSeen is how many plans (progress records not counted) this
	// process last saw, plus those it stored since: prune reads the ids
	// only when it may be over the limit. Other replicas' plans make it
	// low; they prune on their own stores.
	plansSeen int
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
	// them all. Default DefaultKeepPlans.
	KeepPlans int
	// Loads gives plans the nodes' measured load (nil: none, so auto plans
	// balance slot counts and bytes or ops are refused).
	Loads LoadSource
	// BalanceBy is what a plan balances when its request does not say
	// (zero value: auto).
	BalanceBy planner.BalanceBy
}

// DefaultKeepPlans is ControlConfig.KeepPlans' default.
const DefaultKeepPlans = 200

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
		cfg.KeepPlans = DefaultKeepPlans
	}
	if cfg.KeepPlans < 1 {
		return nil, fmt.Errorf("%w: KeepPlans %d must be at least 1", ErrInvalid, cfg.KeepPlans)
	}
	if _, err := planner.ParseBalanceBy(string(cfg.BalanceBy)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &Control{dir: cfg.Directory, sizes: cfg.Sizes, lg: cfg.Logger, now: cfg.Now, keep: cfg.KeepPlans,
		loads: cfg.Loads, balanceBy: cfg.BalanceBy}, nil
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
	in := planner.Input{Version: snap.Version, Owners: snap.Owners(), Nodes: nodes, PerMove: PerMoveEstimate}
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
	var sizesUnknown []string
	if c.sizes != nil {
		sizes, err := c.sizes.SlotSizes(ctx, snap)
		if err != nil {
			c.lg.Warn("slot sizes unavailable; planning without them", "err", err)
			if su := (*SizesUnknownError)(nil); errors.As(err, &su) {
				sizesUnknown = su.Nodes
			}
		} else {
			in.SlotBytes = sizes
		}
	}
	in.BalanceBy, in.Tolerance, in.MaxBytes, in.MaxMoves = req.BalanceBy, req.Tolerance, req.MaxBytes, req.MaxMoves
	if in.BalanceBy == "" {
		in.BalanceBy = c.balanceBy
	}
	if c.loads != nil {
		in.Loads = c.loads.NodeLoads(c.now())
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
		p.ID = fmt.Sprintf("%s-first%d", pp.ID, len(moves))
		p.Nodes = afterMoves(snap, nodes, p.Moves, in.SlotBytes)
	}
	p.Estimate = planner.Estimate(p.TotalBytes, len(p.Moves), in.Throttle, PerMoveEstimate)
	if err := c.store(ctx, p); err != nil {
		return nil, err
	}
	c.lg.Info("plan proposed", "plan", p.ID, "moves", len(p.Moves), "bytes", p.TotalBytes, "base_version", p.BaseVersion, "operator", req.Operator)
	return p, nil
}

// store creates the plan record; an identical plan proposed twice (same
// table, same moves) is the same plan.
func (c *Control) store(ctx context.Context, p *Plan) error {
	data, err := encodePlan(p)
	if err != nil {
		return err
	}
	err = c.dir.CreatePlan(ctx, p.ID, data)
	if errors.Is(err, directory.ErrConflict) {
		old, gerr := c.Get(ctx, p.ID)
		if gerr == nil && old.State == StateProposed {
			return c.update(ctx, p.ID, func(q *Plan) error { *q = *p; return nil })
		}
		if gerr == nil {
			return fmt.Errorf("plan: %w: the same plan %s exists already and is %s", ErrPrecondition, p.ID, old.State)
		}
	}
	if err != nil {
		return fmt.Errorf("store plan %s: %w", p.ID, err)
	}
	c.prune(ctx)
	return nil
}

// prune deletes the oldest plans, with their progress records, beyond the
// newest c.keep that are not applying or paused. It reads the plans only
// when the records outnumber the limit by a margin, so that storing a plan
// does not read every plan each time; a failure is logged, not returned.
func (c *Control) prune(ctx context.Context) {
	limit := c.keep + c.keep/10 + 1
	c.decodedMu.Lock()
	c.plansSeen++
	known := c.plansSeen
	c.decodedMu.Unlock()
	if known <= limit {
		return // fewer plans than allowed: no read needed
	}
	ids, err := c.dir.PlanIDs(ctx)
	if err != nil {
		c.lg.Warn("list plans for retention", "err", err)
		return
	}
	n := countPlans(slices.Values(ids))
	c.decodedMu.Lock()
	c.plansSeen = n
	c.decodedMu.Unlock()
	if n <= limit {
		return
	}
	plans, err := c.List(ctx)
	if err != nil {
		c.lg.Warn("list plans for retention", "err", err)
		return
	}
	plans = slices.DeleteFunc(plans, func(p *Plan) bool { return p.State.Active() })
	old := plans[:max(0, len(plans)-c.keep)] // oldest first
	if len(old) == 0 {
		return
	}
	// One transaction for all of them: this runs inside the request that
	// stored a plan (slotctl move), and a sweep of 20 plans deleted one
	// record at a time added 36-40 ms to every 21st move.
	ids = ids[:0]
	for _, p := range old {
		ids = append(ids, p.ID, p.ID+progressSuffix)
	}
	if err := c.dir.DeletePlans(ctx, ids...); err != nil {
		c.lg.Warn("delete old plans", "plans", len(old), "err", err)
		return
	}
	c.decodedMu.Lock()
	for _, p := range old {
		delete(c.decoded, p.ID)
	}
	c.plansSeen -= len(old)
	c.decodedMu.Unlock()
	c.lg.Info("old plans deleted", "plans", len(old), "oldest", old[0].ID, "newest", old[len(old)-1].ID, "created_from", old[0].Created)
}

// Submit stores a plan from a plan file as proposed, after checking that it
// is well formed and still fits the table. The moves are taken as given.
func (c *Control) Submit(ctx context.Context, p *Plan, operator string) (*Plan, error) {
	if err := ValidatePlan(p); err != nil {
		return nil, err
	}
	q := *p
	q.Moves = slices.Clone(p.Moves)
	for i := range q.Moves {
		q.Moves[i].Status, q.Moves[i].MoveID, q.Moves[i].Error = MovePending, "", ""
		q.Moves[i].Started, q.Moves[i].Finished = time.Time{}, time.Time{}
	}
	q.State, q.Operator, q.Error, q.RolledBackBy, q.AbortCurrent = StateProposed, operator, "", "", false
	q.Created, q.Updated = c.now().UTC(), c.now().UTC()
	if err := c.store(ctx, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// ValidatePlan checks a plan from outside (a plan file): ids, slots in
// range, each slot at most once, source and target different. It says
// what is wrong with the first bad move.
func ValidatePlan(p *Plan) error {
	if p == nil || p.ID == "" {
		return fmt.Errorf("%w: plan has no id", ErrInvalid)
	}
	if len(p.Moves) > slots.Count {
		return fmt.Errorf("%w: plan %s has %d moves, more than %d slots", ErrInvalid, p.ID, len(p.Moves), slots.Count)
	}
	seen := make(map[int]bool, len(p.Moves))
	for i, m := range p.Moves {
		switch {
		case m.Slot < 0 || m.Slot >= slots.Count:
			return fmt.Errorf("%w: plan %s move %d: slot %d out of range 0-%d", ErrInvalid, p.ID, i, m.Slot, slots.Count-1)
		case seen[m.Slot]:
			return fmt.Errorf("%w: plan %s move %d: slot %d moved twice", ErrInvalid, p.ID, i, m.Slot)
		case m.From == "" || m.To == "":
			return fmt.Errorf("%w: plan %s move %d: slot %d needs both from and to", ErrInvalid, p.ID, i, m.Slot)
		case m.From == m.To:
			return fmt.Errorf("%w: plan %s move %d: slot %d moves from %s to itself", ErrInvalid, p.ID, i, m.Slot, m.From)
		case m.Bytes < 0:
			return fmt.Errorf("%w: plan %s move %d: negative size", ErrInvalid, p.ID, i)
		}
		seen[m.Slot] = true
	}
	for _, n := range p.Edits.Add {
		if n.ID == "" || n.Addr == "" || n.Weight < 0 {
			return fmt.Errorf("%w: plan %s adds node %q: needs an id, an address and a weight >= 0", ErrInvalid, p.ID, n.ID)
		}
	}
	return nil
}

// Get returns the stored plan id with its progress.
func (c *Control) Get(ctx context.Context, id string) (*Plan, error) {
	if isProgressID(id) {
		return nil, fmt.Errorf("%w: no plan %q", ErrNotFound, id)
	}
	b, err := c.dir.Plan(ctx, id)
	if err != nil {
		if errors.Is(err, directory.ErrNotFound) || errors.Is(err, directory.ErrInvalid) {
			return nil, fmt.Errorf("%w: no plan %q; list plans with slotctl status", ErrNotFound, id)
		}
		return nil, err
	}
	p, err := c.decode(id, b)
	if err != nil {
		return nil, err
	}
	if err := c.readProgress(ctx, p); err != nil {
		c.lg.Warn("plan progress unreadable; showing the plan record alone", "plan", id, "err", err)
	}
	return p, nil
}

// decode returns a private copy of the plan record b of plan id, decoding
// it only when it differs from the record last decoded.
func (c *Control) decode(id string, b []byte) (*Plan, error) {
	c.decodedMu.Lock()
	d, ok := c.decoded[id]
	c.decodedMu.Unlock()
	if ok && bytes.Equal(d.raw, b) {
		return d.plan.clone(), nil
	}
	p, err := decodePlan(b)
	if err != nil {
		return nil, err
	}
	c.decodedMu.Lock()
	if c.decoded == nil || len(c.decoded) >= 64 {
		c.decoded = map[string]decodedPlan{} // plans are few; forget them all now and then
	}
	c.decoded[id] = decodedPlan{raw: b, plan: p.clone()}
	c.decodedMu.Unlock()
	return p, nil
}

// List returns every stored plan, oldest first, from one read of the
// records (Apply asks for it, to find the active plan).
func (c *Control) List(ctx context.Context) ([]*Plan, error) {
	recs, err := c.dir.Plans(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Plan
	for id, rec := range recs {
		if isProgressID(id) {
			continue
		}
		p, err := c.decode(id, rec.Data)
		if err != nil {
			c.lg.Warn("unreadable plan record", "plan", id, "err", err)
			continue
		}
		if prog, ok := recs[id+progressSuffix]; ok {
			if err := mergeProgress(p, prog.Data); err != nil {
				c.lg.Warn("plan progress unreadable; showing the plan record alone", "plan", id, "err", err)
			}
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Plan) int { return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID)) })
	return out, nil
}

// Active returns the plan that is applying or paused, or nil. It reads
// the plan keys and only the records that changed since it last looked:
// every `slotctl move` and status asks, and up to KeepPlans plans are kept.
func (c *Control) Active(ctx context.Context) (*Plan, error) {
	revs, err := c.dir.PlanRevisions(ctx)
	if err != nil {
		return nil, err
	}
	n := countPlans(maps.Keys(revs))
	c.decodedMu.Lock()
	c.plansSeen = n
	c.decodedMu.Unlock()
	var stale []string // plans whose state is not known at their revision
	for id, rev := range revs {
		c.decodedMu.Lock()
		st, ok := c.states[id]
		c.decodedMu.Unlock()
		if !isProgressID(id) && (!ok || st.rev != rev) {
			stale = append(stale, id)
		}
	}
	if err := c.learnStates(ctx, stale); err != nil {
		return nil, err
	}
	var active []string
	c.decodedMu.Lock()
	for id, rev := range revs {
		if st, ok := c.states[id]; ok && st.rev >= rev && st.state.Active() {
			active = append(active, id)
		}
	}
	c.decodedMu.Unlock()
	var out []*Plan
	for _, id := range active {
		p, err := c.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Plan) int { return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID)) })
	return activeOf(out), nil
}

// learnStates reads and remembers the states of plans ids: one read of
// every record when there are many (the first call after a start), else
// one read each.
func (c *Control) learnStates(ctx context.Context, ids []string) error {
	recs := map[string]directory.PlanRecord{}
	if len(ids) > 8 {
		all, err := c.dir.Plans(ctx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if rec, ok := all[id]; ok {
				recs[id] = rec
			}
		}
	} else {
		for _, id := range ids {
			b, rev, err := c.dir.PlanAt(ctx, id)
			if errors.Is(err, directory.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			recs[id] = directory.PlanRecord{Data: b, Rev: rev}
		}
	}
	for id, rec := range recs {
		p, err := c.decode(id, rec.Data)
		if err != nil {
			c.lg.Warn("unreadable plan record", "plan", id, "err", err)
			continue
		}
		c.decodedMu.Lock()
		if c.states == nil || len(c.states) > 4*c.keep {
			c.states = map[string]planState{}
		}
		c.states[id] = planState{rev: rec.Rev, state: p.State}
		c.decodedMu.Unlock()
	}
	return nil
}

// planState is what Active remembers of a plan record.
type planState struct {
	rev   int64
	state PlanState
}

func activeOf(plans []*Plan) *Plan {
	for _, p := range plans {
		if p.State.Active() {
			return p
		}
	}
	return nil
}

// update rewrites a stored plan by compare-and-swap.
func (c *Control) update(ctx context.Context, id string, edit func(*Plan) error) error {
	err := c.dir.UpdatePlan(ctx, id, func(old []byte) ([]byte, error) {
		p, err := decodePlan(old)
		if err != nil {
			return nil, err
		}
		if err := c.readProgress(ctx, p); err != nil {
			c.lg.Warn("plan progress unreadable", "plan", id, "err", err)
		}
		if err := edit(p); err != nil {
			return nil, err
		}
		p.Updated = c.now().UTC()
		return encodePlan(p)
	})
	if errors.Is(err, directory.ErrNotFound) {
		return fmt.Errorf("%w: no plan %q", ErrNotFound, id)
	}
	return err
}

// Apply starts a proposed plan: it checks the plan still fits the table,
// makes its node edits and marks it applying; the executor takes it from
// there. One plan at a time.
func (c *Control) Apply(ctx context.Context, id, operator string) (*Plan, error) {
	if isProgressID(id) {
		return nil, fmt.Errorf("apply: %w: no plan %q", ErrNotFound, id)
	}
	plans, err := c.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	i := slices.IndexFunc(plans, func(q *Plan) bool { return q.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("apply: %w: no plan %q; list plans with slotctl status", ErrNotFound, id)
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
	err = c.update(ctx, id, func(q *Plan) error {
		if q.State != StateProposed {
			return fmt.Errorf("%w: plan %s became %s meanwhile", ErrPrecondition, id, q.State)
		}
		q.State, q.Operator, q.Error = StateApplying, operator, ""
		if len(prev) > 0 {
			q.PrevWeights = prev
		}
		applied = q
		return nil
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
	return c.transition(ctx, "pause", id, func(p *Plan) error {
		if p.State != StateApplying {
			return fmt.Errorf("%w: plan %s is %s; only an applying plan can be paused", ErrPrecondition, id, p.State)
		}
		p.State, p.AbortCurrent = StatePaused, abortCurrent
		return nil
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
	return c.transition(ctx, "resume", id, func(p *Plan) error {
		if p.State != StatePaused {
			return fmt.Errorf("%w: plan %s is %s", ErrPrecondition, id, p.State)
		}
		p.State, p.AbortCurrent, p.Error = StateApplying, false, ""
		return nil
	})
}

// Cancel stops a plan for good: the executor finishes a move that is
// already fenced, aborts one that is not, and runs no other.
func (c *Control) Cancel(ctx context.Context, id, operator string) (*Plan, error) {
	return c.transition(ctx, "cancel", id, func(p *Plan) error {
		if p.State.Final() {
			return fmt.Errorf("%w: plan %s is already %s", ErrPrecondition, id, p.State)
		}
		p.State, p.AbortCurrent = StateCancelled, true
		return nil
	})
}

func (c *Control) transition(ctx context.Context, op, id string, edit func(*Plan) error) (*Plan, error) {
	if err := c.update(ctx, id, edit); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	c.lg.Info("plan "+op, "plan", id)
	return c.Get(ctx, id)
}

// Rollback proposes and applies the reverse of a finished plan: every move
// it completed, newest first, back to its source, through the same
// protocol. The plan must not be running (cancel it first).
func (c *Control) Rollback(ctx context.Context, id, operator, reason string) (*Plan, error) {
	old, err := c.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	}
	switch {
	case old.State.Active():
		return nil, fmt.Errorf("rollback: %w: plan %s is %s; run slotctl cancel first, then roll back", ErrPrecondition, id, old.State)
	case old.RolledBackBy != "":
		return nil, fmt.Errorf("rollback: %w: plan %s was rolled back already by %s", ErrPrecondition, id, old.RolledBackBy)
	case old.State == StateProposed:
		return nil, fmt.Errorf("rollback: %w: plan %s was never applied; nothing to roll back", ErrPrecondition, id)
	}
	if act, err := c.Active(ctx); err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	} else if act != nil {
		return nil, fmt.Errorf("rollback: %w: plan %s is %s; wait for it or cancel it first", ErrPrecondition, act.ID, act.State)
	}
	snap, err := c.dir.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	}
	now := c.now().UTC()
	p := &Plan{
		ID: "rb-" + old.ID, BaseVersion: snap.Version, State: StateApplying, Operator: operator,
		Reason: reason, Created: now, Updated: now, RollbackOf: old.ID,
	}
	if p.Reason == "" {
		p.Reason = "rollback of " + old.ID
	}
	for i := len(old.Moves) - 1; i >= 0; i-- {
		m := old.Moves[i]
		if m.Status != MoveDone {
			continue
		}
		if owner := snap.Owner(slots.MustNew(m.Slot)); owner != m.To {
			return nil, fmt.Errorf("rollback: %w: slot %d is now owned by %s, not %s as plan %s left it; roll back the later change first", ErrPrecondition, m.Slot, owner, m.To, id)
		}
		// A node the plan drained is undrained below, so it counts as active.
		if n, ok := snap.Node(m.From); !ok || (n.State != directory.NodeActive && !(n.State == directory.NodeDraining && slices.Contains(old.Edits.Drain, m.From))) {
			return nil, fmt.Errorf("rollback: %w: slot %d would go back to %s, which is not an active node", ErrPrecondition, m.Slot, m.From)
		}
		p.Moves = append(p.Moves, PlannedMove{Slot: m.Slot, From: m.To, To: m.From, Bytes: m.Bytes,
			Reason: fmt.Sprintf("roll back %s: slot %d returns to %s", old.ID, m.Slot, m.From), Status: MovePending})
		p.TotalBytes += m.Bytes
	}
	// Undo what the plan did to nodes: weights back, drains lifted. Added
	// nodes stay registered (they own nothing once the moves are back) so
	// that an operator removes them deliberately.
	p.Nodes = afterMoves(snap, nil, p.Moves, nil)
	throttle, err := c.throttle(ctx)
	if err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	}
	p.Throttle = throttle
	p.Estimate = planner.Estimate(p.TotalBytes, len(p.Moves), throttle, PerMoveEstimate)
	if err := c.undoEdits(ctx, snap, old, operator); err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	}
	if len(p.Moves) == 0 {
		p.State = StateDone
	}
	data, err := encodePlan(p)
	if err != nil {
		return nil, err
	}
	if err := c.dir.CreatePlan(ctx, p.ID, data); err != nil {
		return nil, fmt.Errorf("rollback: store plan %s: %w", p.ID, err)
	}
	if err := c.update(ctx, id, func(q *Plan) error {
		q.RolledBackBy = p.ID
		if q.State != StateProposed {
			q.State = StateRolledBack
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("rollback: mark %s: %w", id, err)
	}
	c.lg.Info("plan rolled back", "plan", id, "rollback", p.ID, "moves", len(p.Moves), "operator", operator)
	return p, nil
}

// undoEdits lifts the drains and restores the weights a plan set.
func (c *Control) undoEdits(ctx context.Context, snap *directory.Snapshot, old *Plan, by string) error {
	for _, id := range old.Edits.Drain {
		if n, ok := snap.Node(id); ok && n.Draining {
			if _, err := c.dir.Undrain(ctx, id, "rollback of "+old.ID, by); err != nil {
				return fmt.Errorf("undrain %s: %w", id, err)
			}
		}
	}
	for _, id := range sortedKeys(old.PrevWeights) {
		w := old.PrevWeights[id]
		if n, ok := snap.Node(id); ok && n.Weight != w {
			if _, err := c.dir.SetWeight(ctx, id, w, by); err != nil {
				return fmt.Errorf("restore weight of %s: %w", id, err)
			}
		}
	}
	return nil
}

// MoveSlot applies a one-move plan: slot to node to.
func (c *Control) MoveSlot(ctx context.Context, slot int, to, operator, reason string) (*Plan, error) {
	s, err := slots.New(slot)
	if err != nil {
		return nil, fmt.Errorf("move: %w: %v", ErrInvalid, err)
	}
	// The table and the active plan are read at once: two round trips
	// in the time of one.
	var snap *directory.Snapshot
	var act *Plan
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { snap, err = c.dir.Snapshot(gctx); return err })
	g.Go(func() (err error) { act, err = c.Active(gctx); return err })
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("move: %w", err)
	}
	from := snap.Owner(s)
	n, ok := snap.Node(to)
	switch {
	case !ok:
		return nil, fmt.Errorf("move: %w: node %q is not registered; see slotctl nodes list", ErrNotFound, to)
	case n.State != directory.NodeActive:
		return nil, fmt.Errorf("move: %w: node %s is %s and cannot receive slots", ErrPrecondition, to, n.State)
	case from == to:
		return nil, fmt.Errorf("move: %w: slot %d is already on %s", ErrPrecondition, slot, to)
	}
	if reason == "" {
		reason = "operator move"
	}
	now := c.now().UTC()
	p := &Plan{
		ID: fmt.Sprintf("m-%d-%d-%s", snap.Version, slot, to), BaseVersion: snap.Version, State: StateProposed,
		Operator: operator, Reason: reason, Created: now, Updated: now,
		Moves: []PlannedMove{{Slot: slot, From: from, To: to, Reason: reason, Status: MovePending}},
	}
	p.Nodes = afterMoves(snap, nil, p.Moves, nil)
	// One move from the owner to an active node fits the table it was
	// made on by construction, and there are no node edits: the plan is
	// stored applying at once, instead of stored and then applied (two
	// more round trips and a decode, most of a move of an empty slot).
	if act != nil {
		return nil, fmt.Errorf("move: %w: plan %s is %s; wait for it, or slotctl cancel it first", ErrPrecondition, act.ID, act.State)
	}
	p.State = StateApplying
	if err := c.store(ctx, p); err != nil {
		return nil, fmt.Errorf("move: %w", err)
	}
	c.lg.Info("plan applied", "plan", p.ID, "moves", 1, "operator", operator)
	return p, nil
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

// applyEdits returns the planner's node set: the directory's nodes with the
// edits applied in imagination. It refuses edits naming unknown nodes or
// adding known ones.
func applyEdits(snap *directory.Snapshot, e Edits) ([]planner.Node, error) {
	nodes := make([]planner.Node, 0, len(snap.Nodes)+len(e.Add))
	index := map[string]int{}
	for _, n := range snap.Nodes {
		index[n.ID] = len(nodes)
		nodes = append(nodes, planner.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone, State: string(n.State)})
	}
	for _, a := range e.Add {
		if a.ID == "" {
			return nil, fmt.Errorf("%w: a node to add has no id", ErrInvalid)
		}
		if i, ok := index[a.ID]; ok {
			// Already registered (a node registers itself when it starts):
			// planning to add it is planning to fill it.
			if a.Weight > 0 {
				nodes[i].Weight = a.Weight
			}
			continue
		}
		w := a.Weight
		if w == 0 {
			w = 1
		}
		index[a.ID] = len(nodes)
		nodes = append(nodes, planner.Node{ID: a.ID, Weight: w, Zone: a.Zone, State: planner.StateActive})
	}
	for _, id := range e.Drain {
		i, ok := index[id]
		if !ok {
			return nil, fmt.Errorf("%w: cannot drain %q: no such node", ErrNotFound, id)
		}
		if nodes[i].State != planner.StateDown { // a down node stays down: nothing copies from it
			nodes[i].State = planner.StateDraining
		}
	}
	for _, id := range sortedKeys(e.Weights) {
		i, ok := index[id]
		if !ok {
			return nil, fmt.Errorf("%w: cannot weight %q: no such node", ErrNotFound, id)
		}
		w := e.Weights[id]
		if w < 0 {
			return nil, fmt.Errorf("%w: weight %d for %s is negative", ErrInvalid, w, id)
		}
		if w == 0 {
			if nodes[i].State != planner.StateDown {
				nodes[i].State = planner.StateDraining
			}
			continue
		}
		nodes[i].Weight = w
	}
	return nodes, nil
}

func plannerInput(snap *directory.Snapshot, nodes []planner.Node) planner.Input {
	in := planner.Input{Version: snap.Version, Owners: snap.Owners(), Nodes: nodes}
	if len(snap.Moves) > 0 {
		busy := &slots.Set{}
		for _, m := range snap.Moves {
			busy.Add(m.Slot)
		}
		in.Busy = busy
	}
	return in
}

func toPlannerPlan(p *Plan) *planner.Plan {
	pp := &planner.Plan{ID: p.ID, BaseVersion: p.BaseVersion}
	for _, m := range p.Moves {
		if m.Status == MovePending {
			pp.Moves = append(pp.Moves, planner.Move{Slot: m.Slot, From: m.From, To: m.To, Bytes: m.Bytes})
		}
	}
	return pp
}

// checkRemaining checks the pending moves of p against the table: a move
// whose target already owns its slot is fine (it will be skipped).
func checkRemaining(p *Plan, snap *directory.Snapshot) error {
	nodes := make([]planner.Node, 0, len(snap.Nodes))
	for _, n := range snap.Nodes {
		nodes = append(nodes, planner.Node{ID: n.ID, Weight: n.Weight, Zone: n.Zone, State: string(n.State)})
	}
	pp := toPlannerPlan(p)
	pp.Moves = slices.DeleteFunc(pp.Moves, func(m planner.Move) bool { return snap.Owner(slots.MustNew(m.Slot)) == m.To })
	in := plannerInput(snap, nodes)
	in.Busy = nil // the plan's own move in flight is not a conflict
	return planner.Check(pp, 0, in)
}

// afterMoves computes per-node before/after counts for an explicit list of
// moves (a truncated plan, a rollback, a single move).
func afterMoves(snap *directory.Snapshot, nodes []planner.Node, moves []PlannedMove, sizes []int64) []planner.NodeChange {
	counts := snap.Counts()
	var out []planner.NodeChange
	idx := map[string]int{}
	add := func(id, state string, weight int) {
		if _, ok := idx[id]; ok {
			return
		}
		idx[id] = len(out)
		out = append(out, planner.NodeChange{ID: id, State: state, Weight: weight, SlotsBefore: counts[id], SlotsAfter: counts[id]})
	}
	for _, n := range nodes {
		add(n.ID, n.State, n.Weight)
	}
	for _, n := range snap.Nodes {
		add(n.ID, string(n.State), n.Weight)
	}
	if sizes != nil {
		for s, o := range snap.Owners() {
			if i, ok := idx[o]; ok {
				out[i].BytesBefore += sizes[s]
				out[i].BytesAfter += sizes[s]
			}
		}
	}
	for _, m := range moves {
		add(m.From, "", 0)
		add(m.To, planner.StateActive, 1)
		out[idx[m.From]].SlotsAfter--
		out[idx[m.To]].SlotsAfter++
		out[idx[m.From]].BytesAfter -= m.Bytes
		out[idx[m.To]].BytesAfter += m.Bytes
	}
	pn := make([]planner.Node, len(out))
	cur := make([]int, len(out))
	for i, n := range out {
		pn[i], cur[i] = planner.Node{ID: n.ID, State: n.State, Weight: n.Weight}, n.SlotsBefore
	}
	for i, t := range planner.Targets(pn, cur) {
		out[i].TargetSlots = t
	}
	slices.SortFunc(out, func(a, b planner.NodeChange) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
