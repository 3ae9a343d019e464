package mover

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover/planner"
	"github.com/slotd/slotd/slots"
)

// defaultRollbackWait is ControlConfig.RollbackWait's default.
const defaultRollbackWait = 30 * time.Second

// settled waits, up to c.rollbackWait, until no move of plan id is in
// flight, and returns the table then. A plan just cancelled or paused can
// begin no move (its run key is gone), but the moves it had begun end on
// their own: each commits or aborts, and writes its result as it does.
func (c *Control) settled(ctx context.Context, id string) (*directory.Snapshot, error) {
	deadline := time.Now().Add(c.rollbackWait)
	wait := 5 * time.Millisecond
	for {
		snap, err := c.dir.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, m := range snap.Moves {
			if m.PlanID == id {
				n++
			}
		}
		if n == 0 {
			return snap, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: plan %s still has %d moves in flight after %s; roll back again once they end", ErrPrecondition, id, n, c.rollbackWait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// Rollback proposes and applies the reverse of a finished plan: every move
// it committed, newest first, back to its source, through the same
// protocol. The plan must not be running (cancel it first); its moves
// still in flight are waited for (up to RollbackWait), so that a rollback
// issued right after a cancel reverses exactly what the plan committed.
func (c *Control) Rollback(ctx context.Context, id, operator, reason string) (*Plan, error) {
	old, err := c.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	}
	if err := rollbackable(old); err != nil {
		return nil, err
	}
	if act, err := c.Active(ctx); err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	} else if act != nil {
		return nil, fmt.Errorf("rollback: %w: plan %s is %s; wait for it or cancel it first", ErrPrecondition, act.ID, act.State)
	}
	snap, err := c.settled(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	}
	// The results as they stand once nothing of the plan is in flight.
	if old, err = c.Get(ctx, id); err != nil {
		return nil, fmt.Errorf("rollback: %w", err)
	}
	if err := rollbackable(old); err != nil {
		return nil, err
	}
	return c.reverse(ctx, old, snap, operator, reason)
}

// rollbackable says why plan old cannot be rolled back, if it cannot.
func rollbackable(old *Plan) error {
	id := old.ID
	switch {
	case old.State.Active():
		return fmt.Errorf("rollback: %w: plan %s is %s; run slotctl cancel first, then roll back", ErrPrecondition, id, old.State)
	case old.RolledBackBy != "":
		return fmt.Errorf("rollback: %w: plan %s was rolled back already by %s", ErrPrecondition, id, old.RolledBackBy)
	case old.State == StateProposed:
		return fmt.Errorf("rollback: %w: plan %s was never applied; nothing to roll back", ErrPrecondition, id)
	}
	return nil
}

// reverse stores and starts the rollback of old on table snap.
func (c *Control) reverse(ctx context.Context, old *Plan, snap *directory.Snapshot, operator, reason string) (*Plan, error) {
	id := old.ID
	now := c.now().UTC()
	p := &Plan{
		ID: boundID("rb-" + old.ID), BaseVersion: snap.Version, State: StateApplying, Operator: operator,
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
	p.Estimate = planner.Estimate(p.TotalBytes, len(p.Moves), throttle, perMoveEstimate)
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
	run := directory.RunStart
	if p.State == StateDone {
		run = directory.RunKeep
	}
	if err := c.dir.CreatePlanRun(ctx, p.ID, data, run); err != nil {
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
