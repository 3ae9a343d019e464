package mover

// One-slot moves (slotctl move): planned on the leader's table and begun in one transaction when this process leads, else stored and applied as any plan.

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// MoveSlot applies a one-move plan: slot to node to. When this process's
// executor leads, it stores the plan and begins its move in one
// transaction (onemove.go); otherwise, or when that does not apply
// cleanly, the plan is stored applying for the executor to begin.
func (c *Control) MoveSlot(ctx context.Context, slot int, to, operator, reason string) (*Plan, error) {
	s, err := slots.New(slot)
	if err != nil {
		return nil, fmt.Errorf("move: %w: %v", ErrInvalid, err)
	}
	if reason == "" {
		reason = "operator move"
	}
	if p, err, done := c.moveByLeader(ctx, s, to, operator, reason); done {
		return p, err
	}
	// The table and the active plan are read at once: two round trips
	// in the time of one.
	var snap *directory.Snapshot
	var act *Plan
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { snap, err = c.table(gctx); return err })
	g.Go(func() (err error) { act, err = c.Active(gctx); return err })
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("move: %w", err)
	}
	p, err := c.onePlan(snap, s, to, operator, reason)
	if err != nil {
		return nil, err
	}
	// One move from the owner to an active node fits the table it was
	// made on by construction, and there are no node edits: the plan is
	// stored applying at once, instead of stored and then applied (two
	// more round trips and a decode, most of a move of an empty slot).
	if act != nil {
		return nil, fmt.Errorf("move: %w: plan %s is %s; wait for it, or slotctl cancel it first", ErrPrecondition, act.ID, act.State)
	}
	if err := c.store(ctx, p); err != nil {
		return nil, fmt.Errorf("move: %w", err)
	}
	c.lg.Info("plan applied", "plan", p.ID, "moves", 1, "operator", operator)
	return p, nil
}

// moveByLeader is MoveSlot's way through this process's leading executor:
// the plan made on the table the leader watches, no plan active as far as
// the leader's plan watch knows, the plan stored and its move begun in one
// transaction that refuses a stale table or a plan written since. done is
// false when that way does not apply or was refused before anything was
// written: MoveSlot then decides on fresh reads.
func (c *Control) moveByLeader(ctx context.Context, s slots.Slot, to, operator, reason string) (p *Plan, err error, done bool) {
	e := c.exec.Load()
	if e == nil || !e.isLeader() {
		return nil, nil, false
	}
	snap := e.latest.Load()
	through, idle := c.plansIdle()
	if snap == nil || !idle {
		return nil, nil, false
	}
	if p, err = c.onePlan(snap, s, to, operator, reason); err != nil {
		return nil, nil, false // the watched table may lag: decide on a read
	}
	data, err := encodePlan(p)
	if err != nil {
		return nil, err, true
	}
	err = e.beginOneMove(ctx, p.clone(), data, snap, through)
	switch {
	case err == nil:
	case errors.Is(err, directory.ErrConflict), errors.Is(err, directory.ErrPrecondition), errors.Is(err, directory.ErrNotFound),
		errors.Is(err, directory.ErrInvalid), errors.Is(err, ErrPrecondition), errors.Is(err, ErrInvalid), errors.Is(err, errNotLeading):
		c.lg.Debug("one-move plan not begun by the leader; storing it for the executor", "plan", p.ID, "err", err)
		return nil, nil, false // nothing written
	default:
		return nil, fmt.Errorf("move: %w", err), true
	}
	c.prune(ctx)
	c.lg.Info("plan applied", "plan", p.ID, "moves", 1, "operator", operator, "begun", true)
	return p, nil, true
}

// onePlan returns the plan, applying, of moving slot s to node to on snap.
func (c *Control) onePlan(snap *directory.Snapshot, s slots.Slot, to, operator, reason string) (*Plan, error) {
	slot := s.Int()
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
	now := c.now().UTC()
	p := &Plan{
		ID: boundID(fmt.Sprintf("m-%d-%d-%s", snap.Version, slot, to)), BaseVersion: snap.Version, State: StateApplying,
		Operator: operator, Reason: reason, Created: now, Updated: now,
		Moves: []PlannedMove{{Slot: slot, From: from, To: to, Reason: reason, Status: MovePending}},
	}
	p.Nodes = afterMoves(snap, nil, p.Moves, nil)
	return p, nil
}
