package directory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/slots"
)

// BeginMove starts moving spec.Slot from spec.From (which must own it) to
// spec.To (which must be active and different), in PhaseCopy. The slot
// must be stable: at most one move per slot. Errors: ErrInvalid,
// ErrNotFound (unknown node), ErrPrecondition, ErrNotBootstrapped,
// ErrConflict (ExpectVersion no longer current, or every retry lost).
func (d *Directory) BeginMove(ctx context.Context, spec MoveSpec) (*Move, error) {
	op := fmt.Sprintf("begin move of slot %d", spec.Slot.Int())
	if err := d.checkSpec(op, &spec); err != nil {
		return nil, err
	}
	var out Move
	_, err := d.update(ctx, op, updateOpts{expect: spec.ExpectVersion, needBootstrap: true}, func(st *state, m *mutation) error {
		return d.begin(st, m, spec, false, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// PlanMove is a plan of one move, stored and begun at once by
// CreatePlanMove.
type PlanMove struct {
	// Spec is the move; its PlanID names the plan, stored applying.
	Spec MoveSpec
	// Plan is the plan record.
	Plan []byte
	// PlansThrough, when non-zero, is a revision through which the caller
	// knows the state of every plan record: the transaction applies only
	// if no plan record was written after it (a plan the caller does not
	// know of may be active). Zero: no such condition.
	PlansThrough int64
}

// CreatePlanMove stores a new plan record with its run key (a plan stored
// applying, as CreatePlanRun with RunStart) and begins its move pm.Spec
// (as BeginMove), in one transaction: `slotctl move` then costs one
// transaction instead of two, and the mover finds the move begun. Either
// both are written or neither. It fails with ErrConflict, without retrying,
// when the plan exists, when a plan record was written after
// pm.PlansThrough, or when the table is not at pm.Spec.ExpectVersion (if
// set) or changes while it is written; then nothing was written. Other
// errors are BeginMove's.
func (d *Directory) CreatePlanMove(ctx context.Context, pm PlanMove) (*Move, error) {
	spec := pm.Spec
	op := fmt.Sprintf("create plan %s and begin move of slot %d", spec.PlanID, spec.Slot.Int())
	if spec.PlanID == "" {
		return nil, fmt.Errorf("%s: %w: the move needs a plan id", op, ErrInvalid)
	}
	if err := d.checkSpec(op, &spec); err != nil {
		return nil, err
	}
	c, err := d.planCreation(ctx, spec.PlanID, pm.Plan, RunStart)
	if err != nil {
		return nil, fmt.Errorf("%s: plan: %w", op, err)
	}
	var out Move
	_, err = d.update(ctx, op, updateOpts{needBootstrap: true, alone: true}, func(st *state, m *mutation) error {
		if spec.ExpectVersion != 0 && st.version != spec.ExpectVersion {
			// On the cached table this sends the update to a fresh read.
			return fmt.Errorf("%w: expected version %d, directory is at %d", ErrConflict, spec.ExpectVersion, st.version)
		}
		if err := d.begin(st, m, spec, true, &out); err != nil {
			return err
		}
		m.cmps = append(m.cmps, c.cmp)
		if pm.PlansThrough > 0 {
			// Every plan record (none, or all) was last written at or
			// before PlansThrough.
			m.cmps = append(m.cmps, clientv3.Compare(clientv3.ModRevision(d.k.plansPrefix()), "<", pm.PlansThrough+1).WithPrefix())
		}
		m.extra = append(m.extra, c.ops...)
		return nil
	})
	c.written(err == nil)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// checkSpec validates a move spec, filling a missing move id.
func (d *Directory) checkSpec(op string, spec *MoveSpec) error {
	if err := checkID("source node id", spec.From); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := checkID("target node id", spec.To); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if spec.From == spec.To {
		return fmt.Errorf("%s: %w: source and target are both %q", op, ErrInvalid, spec.To)
	}
	if spec.MoveID == "" {
		spec.MoveID = newMoveID()
	} else if err := checkID("move id", spec.MoveID); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if spec.PlanID != "" {
		if err := checkID("plan id", spec.PlanID); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if spec.Index < 0 || spec.Index >= maxPlanMoves {
			return fmt.Errorf("%s: %w: move index %d out of range", op, ErrInvalid, spec.Index)
		}
	}
	if err := checkText(spec.Reason, spec.By); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// begin records the move spec on st (BeginMove's edit) and sets *out.
// newPlan says the same transaction creates the plan's run key, so the
// plan need not be running yet.
func (d *Directory) begin(st *state, m *mutation, spec MoveSpec, newPlan bool, out *Move) error {
	s := spec.Slot.Uint16()
	if cur, ok := st.moves[s]; ok {
		if !newPlan && cur.MoveID == spec.MoveID && cur.From == spec.From && cur.To == spec.To {
			// A retried BeginMove whose first attempt applied.
			*out = cur.move()
			return nil
		}
		return fmt.Errorf("%w: slot %d is not stable: move %s (%s -> %s) is in flight", ErrPrecondition, s, cur.MoveID, cur.From, cur.To)
	}
	switch {
	case newPlan:
		st.runs[spec.PlanID] = true
	case spec.PlanID != "":
		// The cached table does not see run keys written since (a plan
		// stored applying right before its first move): the txn
		// compares the run key anyway, and a compare that fails sends
		// the update to a fresh read, where a missing key refuses.
		if !st.runs[spec.PlanID] && !st.cached {
			return fmt.Errorf("%w: plan %s is paused, cancelled or finished: none of its moves may begin", ErrPlanNotRunning, spec.PlanID)
		}
		st.runs[spec.PlanID] = true
		m.needRun(spec.PlanID)
	}
	from, ok := st.nodes[spec.From]
	if !ok {
		return fmt.Errorf("%w: source node %q is not registered", ErrNotFound, spec.From)
	}
	to, ok := st.nodes[spec.To]
	if !ok {
		return fmt.Errorf("%w: target node %q is not registered", ErrNotFound, spec.To)
	}
	if st.owners[s] != from.Index {
		owner := "nobody"
		if o := st.ownerOf(s); o != nil {
			owner = o.ID
		}
		return fmt.Errorf("%w: slot %d is owned by %s, not %s", ErrPrecondition, s, owner, spec.From)
	}
	if to.state() != NodeActive {
		return fmt.Errorf("%w: target node %q is %s; only active nodes receive slots", ErrPrecondition, spec.To, to.state())
	}
	if r := st.replicasOf(int(s)); r != nil && len(r.members()) > 1 {
		return fmt.Errorf("%w: slot %d has %d replicas; it moves by replica steps (add a learner, transfer the primary, remove a replica), not as one owner", ErrPrecondition, s, len(r.members()))
	}
	now := d.cfg.Now().UTC()
	mv := &moveRec{
		Slot: s, From: spec.From, To: spec.To, MoveID: spec.MoveID, PlanID: spec.PlanID, Index: spec.Index,
		Phase: PhaseCopy, Reason: spec.Reason, By: spec.By, Started: now, Updated: now,
	}
	st.moves[s] = mv
	m.move(s)
	m.change = moveChange(ChangeMoveBegin, mv, spec.Reason, spec.By)
	m.slot(s)
	*out = mv.move()
	return nil
}

// AdvanceMove moves the move of slot s with id moveID forward to phase.
// Advancing to the current phase is a no-op (so a resumed mover may repeat
// it); going backwards is ErrPrecondition. It returns the version.
func (d *Directory) AdvanceMove(ctx context.Context, s slots.Slot, moveID string, phase Phase) (uint64, error) {
	op := fmt.Sprintf("advance move %s of slot %d to %s", moveID, s.Int(), phase)
	if _, ok := phaseOrder[phase]; !ok {
		return 0, fmt.Errorf("%s: %w: unknown phase %q (want copy, catchup or fenced)", op, ErrInvalid, phase)
	}
	return d.editMove(ctx, op, s, moveID, func(st *state, mv *moveRec, m *mutation) error {
		switch {
		case mv.Phase == phase:
			return nil
		case phaseOrder[phase] < phaseOrder[mv.Phase]:
			return fmt.Errorf("%w: move is already in phase %s", ErrPrecondition, mv.Phase)
		}
		mv.Phase = phase
		mv.Updated = d.cfg.Now().UTC()
		m.move(mv.Slot)
		m.change = moveChange(ChangeMoveAdvance, mv, "", "")
		return nil
	})
}

// CommitMove makes the target of the move the owner of slot s and ends the
// move, in one txn. The move must be in PhaseFenced (the source stopped
// writes), else ErrPrecondition. ErrNotFound when no move with moveID is in
// flight for s. It returns the new version. A move of a plan gets its
// result (done) stored in the same txn; CommitMoveCopied adds what the
// transfer copied.
func (d *Directory) CommitMove(ctx context.Context, s slots.Slot, moveID, by string) (uint64, error) {
	return d.CommitMoveCopied(ctx, s, moveID, by, Copied{})
}

// Copied is what a transfer applied on the target.
type Copied struct{ Bytes, Keys int64 }

// CommitMoveCopied is CommitMove recording copied in the plan's result.
func (d *Directory) CommitMoveCopied(ctx context.Context, s slots.Slot, moveID, by string, copied Copied) (uint64, error) {
	return d.commitMove(ctx, s, moveID, by, copied, false)
}

// CommitFencedMove is CommitMoveCopied for a caller that fenced the source
// itself and saw it drained, whatever phase the move is recorded in: the
// commit is then the only transaction after the begin (no AdvanceMove to
// PhaseFenced first). A mover that dies between its fence and this commit
// leaves the move recorded before the fence; the next one resumes it
// (fencing again is idempotent) or aborts it, and Abort unfences first. A
// fence nobody lifts is lifted by the source's reconciliation (the
// store's periodic comparison of what it holds with its map). History records the commit in PhaseFenced.
func (d *Directory) CommitFencedMove(ctx context.Context, s slots.Slot, moveID, by string, copied Copied) (uint64, error) {
	return d.commitMove(ctx, s, moveID, by, copied, true)
}

func (d *Directory) commitMove(ctx context.Context, s slots.Slot, moveID, by string, copied Copied, fenced bool) (uint64, error) {
	op := fmt.Sprintf("commit move %s of slot %d", moveID, s.Int())
	if err := checkText("", by); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return d.editMove(ctx, op, s, moveID, func(st *state, mv *moveRec, m *mutation) error {
		if fenced {
			mv.Phase = PhaseFenced
		}
		if mv.Phase != PhaseFenced {
			return fmt.Errorf("%w: move is in phase %s; advance it to fenced (source stopped writes) before commit", ErrPrecondition, mv.Phase)
		}
		to, ok := st.nodes[mv.To]
		if !ok {
			// RemoveNode refuses nodes in a move, so this is a corrupt table.
			return fmt.Errorf("%w: target node %q of the move is not registered", ErrPrecondition, mv.To)
		}
		st.owners[mv.Slot] = to.Index
		if st.replicasOf(int(mv.Slot)) != nil {
			// A set of the old owner alone (BeginMove refuses larger
			// ones): the new owner alone is implied, at this version.
			st.setReplicas(m, int(mv.Slot), nil)
		}
		delete(st.moves, mv.Slot)
		m.move(mv.Slot)
		m.chunk(int(mv.Slot))
		m.change = moveChange(ChangeMoveCommit, mv, mv.Reason, by)
		return d.putResult(m, mv, MoveResult{Status: ResultDone, Bytes: copied.Bytes, Keys: copied.Keys})
	})
}

// AbortMove ends the move of slot s without changing its owner, at any
// phase. It returns the new version. ErrNotFound when no move with moveID
// is in flight for s. A move of a plan goes back to pending (its result
// is deleted in the same txn); AbortMoveAs records another outcome.
func (d *Directory) AbortMove(ctx context.Context, s slots.Slot, moveID, reason, by string) (uint64, error) {
	return d.AbortMoveAs(ctx, s, moveID, reason, by, "")
}

// AbortMoveAs is AbortMove storing the move's plan result with status
// (ResultAborted, ResultFailed) and reason as its error, in the same txn;
// an empty status leaves the move pending.
func (d *Directory) AbortMoveAs(ctx context.Context, s slots.Slot, moveID, reason, by, status string) (uint64, error) {
	op := fmt.Sprintf("abort move %s of slot %d", moveID, s.Int())
	if err := checkText(reason, by); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	switch status {
	case "", ResultAborted, ResultFailed:
	default:
		return 0, fmt.Errorf("%s: %w: an abort cannot end as %q", op, ErrInvalid, status)
	}
	return d.editMove(ctx, op, s, moveID, func(st *state, mv *moveRec, m *mutation) error {
		delete(st.moves, mv.Slot)
		m.move(mv.Slot)
		m.change = moveChange(ChangeMoveAbort, mv, reason, by)
		if status == "" {
			if mv.PlanID != "" {
				m.extra = append(m.extra, clientv3.OpDelete(d.k.result(mv.PlanID, mv.Index)))
			}
			return nil
		}
		return d.putResult(m, mv, MoveResult{Status: status, Error: reason})
	})
}

// editMove applies edit to the move in flight for s with id moveID.
func (d *Directory) editMove(ctx context.Context, op string, s slots.Slot, moveID string, edit func(st *state, mv *moveRec, m *mutation) error) (uint64, error) {
	if err := checkID("move id", moveID); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return d.update(ctx, op, updateOpts{needBootstrap: true}, func(st *state, m *mutation) error {
		mv, ok := st.moves[s.Uint16()]
		if !ok || mv.MoveID != moveID {
			return fmt.Errorf("%w: no move %s in flight for slot %d", ErrNotFound, moveID, s.Int())
		}
		if err := edit(st, mv, m); err != nil {
			return err
		}
		m.slot(mv.Slot)
		return nil
	})
}

func moveChange(kind string, mv *moveRec, reason, by string) Change {
	return Change{
		Kind: kind, From: mv.From, To: mv.To, MoveID: mv.MoveID, PlanID: mv.PlanID,
		Phase: mv.Phase, Reason: reason, By: by,
	}
}

// newMoveID returns a random 16-hex-digit id.
func newMoveID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "m-" + hex.EncodeToString(b[:])
}
