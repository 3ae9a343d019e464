package grpcapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover"
)

// errPlanFile marks a plan file that cannot be a plan of this cluster:
// wrong whatever the cluster did since (InvalidArgument, exit 1), as
// opposed to a stale plan, right when made but overtaken since
// (FailedPrecondition, exit 3: plan again).
var errPlanFile = errors.New("invalid plan file")

// checkPlanFile checks a submitted plan against the directory at the
// plan's own base version: a base ahead of the directory, a node the
// cluster never had, or a move whose source did not own its slot at the
// base is errPlanFile. The owners at the base come from the table now with
// the later commits undone from the history; when the history no longer
// reaches back that far (or holds a change this check does not know how to
// undo), the moves are left to Apply's staleness check.
func (s *AdminServer) checkPlanFile(ctx context.Context, p *mover.Plan) error {
	snap, err := s.dir.Snapshot(ctx)
	if err != nil {
		return err
	}
	if p.BaseVersion > snap.Version {
		return fmt.Errorf("%w: plan %s: base_version %d is ahead of the directory (version %d): it was not made on this cluster",
			errPlanFile, p.ID, p.BaseVersion, snap.Version)
	}
	known, err := s.knownNodes(ctx, snap)
	if err != nil {
		return err
	}
	for _, n := range p.Edits.Add {
		known[n.ID] = true
	}
	for i, m := range p.Moves {
		for _, id := range []string{m.From, m.To} {
			if !known[id] {
				return fmt.Errorf("%w: plan %s move %d (slot %d): node %q was never part of this cluster", errPlanFile, p.ID, i, m.Slot, id)
			}
		}
	}
	owners, ok, err := s.ownersAt(ctx, snap, p.BaseVersion)
	if err != nil || !ok {
		return err
	}
	for i, m := range p.Moves {
		if o := owners[m.Slot]; o != m.From {
			return fmt.Errorf("%w: plan %s move %d: slot %d was owned by %s at the plan's base version %d, not %s",
				errPlanFile, p.ID, i, m.Slot, o, p.BaseVersion, m.From)
		}
	}
	return nil
}

// knownNodes returns every node the cluster has now or had within its kept
// history and audit log.
func (s *AdminServer) knownNodes(ctx context.Context, snap *directory.Snapshot) (map[string]bool, error) {
	known := map[string]bool{}
	for _, n := range snap.Nodes {
		known[n.ID] = true
	}
	hist, err := s.dir.History(ctx, 0)
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
	audit, err := s.dir.Audit(ctx, directory.AuditQuery{Kind: directory.AuditNode})
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
func (s *AdminServer) ownersAt(ctx context.Context, snap *directory.Snapshot, base uint64) ([]string, bool, error) {
	owners := snap.Owners()
	if base == snap.Version {
		return owners, true, nil
	}
	later, err := s.dir.HistorySince(ctx, base, 0)
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
