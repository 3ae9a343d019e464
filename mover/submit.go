package mover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// The submit path of an operator's plan file (`slotctl apply plan.json`):
// its checks, then the plan stored as proposed.

// ErrPlanFile marks a plan file that cannot be a plan of this cluster:
// wrong whatever the cluster did since (the gRPC layer answers
// InvalidArgument, slotctl exits 1), as opposed to a stale plan, right when
// made but overtaken since (ErrPrecondition: plan again). Its text is the
// start of what the operator reads.
var ErrPlanFile = errors.New("invalid plan file")

// Submit stores a plan from a plan file as proposed, after checking that it
// is well formed (ValidatePlan) and can be a plan of this cluster
// (checkPlanFile): either failing is ErrPlanFile. The moves are taken as
// given; Apply checks that they still fit the table.
func (c *Control) Submit(ctx context.Context, p *Plan, operator string) (*Plan, error) {
	if err := ValidatePlan(p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlanFile, err)
	}
	if err := c.checkPlanFile(ctx, p); err != nil {
		return nil, err
	}
	q := *p
	q.Moves = slices.Clone(p.Moves)
	for i := range q.Moves {
		q.Moves[i].Status, q.Moves[i].MoveID, q.Moves[i].Error, q.Moves[i].Copied = MovePending, "", "", 0
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

// checkPlanFile checks a submitted plan against the directory at the
// plan's own base version: a base ahead of the directory, a node the
// cluster never had, or a move whose source did not own its slot at the
// base is ErrPlanFile. The owners at the base come from the table now with
// the later commits undone from the history; when the history no longer
// reaches back that far (or holds a change this check does not know how to
// undo), the moves are left to Apply's staleness check.
func (c *Control) checkPlanFile(ctx context.Context, p *Plan) error {
	snap, err := c.dir.Snapshot(ctx)
	if err != nil {
		return err
	}
	if p.BaseVersion > snap.Version {
		return fmt.Errorf("%w: plan %s: base_version %d is ahead of the directory (version %d): it was not made on this cluster",
			ErrPlanFile, p.ID, p.BaseVersion, snap.Version)
	}
	known, err := c.knownNodes(ctx, snap)
	if err != nil {
		return err
	}
	for _, n := range p.Edits.Add {
		known[n.ID] = true
	}
	for i, m := range p.Moves {
		for _, id := range []string{m.From, m.To} {
			if !known[id] {
				return fmt.Errorf("%w: plan %s move %d (slot %d): node %q was never part of this cluster", ErrPlanFile, p.ID, i, m.Slot, id)
			}
		}
	}
	owners, ok, err := c.ownersAt(ctx, snap, p.BaseVersion)
	if err != nil || !ok {
		return err
	}
	for i, m := range p.Moves {
		if o := owners[m.Slot]; o != m.From {
			return fmt.Errorf("%w: plan %s move %d: slot %d was owned by %s at the plan's base version %d, not %s",
				ErrPlanFile, p.ID, i, m.Slot, o, p.BaseVersion, m.From)
		}
	}
	return nil
}

// knownNodes returns every node the cluster has now or had within its kept
// history and audit log.
func (c *Control) knownNodes(ctx context.Context, snap *directory.Snapshot) (map[string]bool, error) {
	known := map[string]bool{}
	for _, n := range snap.Nodes {
		known[n.ID] = true
	}
	hist, err := c.dir.History(ctx, 0)
	if err != nil {
		return nil, err
	}
	for _, c := range hist {
		for _, id := range []string{c.Node, c.From, c.To} {
			if id != "" {
				known[id] = true
			}
		}
	}
	audit, err := c.dir.Audit(ctx, directory.AuditQuery{Kind: directory.AuditNode})
	if err != nil {
		return nil, err
	}
	for _, e := range audit {
		if e.Node != "" {
			known[e.Node] = true
		}
	}
	return known, nil
}

// ownersKept are the change kinds that change no owner.
var ownersKept = map[string]bool{
	directory.ChangeNodeRegister: true, directory.ChangeNodeAddr: true, directory.ChangeNodeWeight: true,
	directory.ChangeNodeDrain: true, directory.ChangeNodeUndrain: true, directory.ChangeNodeRemove: true,
	directory.ChangeNodeDown: true, directory.ChangeNodeUp: true, directory.ChangeMoveBegin: true,
	directory.ChangeMoveAdvance: true, directory.ChangeMoveAbort: true, directory.ChangeReindexNodes: true,
	directory.ChangeReplication: true, string(directory.StepAddLearner): true, string(directory.StepJoinISR): true,
	string(directory.StepRemoveReplica): true, string(directory.StepShrinkISR): true, string(directory.StepExpandISR): true,
}

// ownersAt returns the owner of every slot at version base, by undoing the
// commits after it; ok is false when the kept history cannot tell.
func (c *Control) ownersAt(ctx context.Context, snap *directory.Snapshot, base uint64) ([]string, bool, error) {
	owners := snap.Owners()
	if base == snap.Version {
		return owners, true, nil
	}
	later, err := c.dir.HistorySince(ctx, base, 0)
	if err != nil {
		return nil, false, err
	}
	if len(later) == 0 || later[0].Version != base+1 || later[len(later)-1].Version != snap.Version {
		return nil, false, nil // trimmed, or the table moved on while reading
	}
	for i := len(later) - 1; i >= 0; i-- {
		c := later[i]
		switch {
		case (c.Kind == directory.ChangeMoveCommit || c.Kind == string(directory.StepTransferPrimary)) && c.From != "":
			owners[c.Slot.Int()] = c.From
		case ownersKept[c.Kind]:
		default:
			return nil, false, nil // bootstrap, or a kind this check cannot undo
		}
	}
	return owners, true, nil
}
