package mover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/slotd/slotd/directory"
)

// legacyProgressSuffix named schema 1's progress records: a plan's move
// results, written by the leader at most every 500 ms beside the plan as
// "<plan id>.progress". Schema 2 keeps each result in the directory, in
// the transaction that ends the move.
const legacyProgressSuffix = ".progress"

// legacyProgress is a schema 1 progress record: one status byte per move
// ('p'ending, 'd'one, 's'kipped, 'a'borted) and the errors of the moves that
// have one.
type legacyProgress struct {
	Status string         `json:"status"`
	Errors map[int]string `json:"errors,omitempty"`
}

// UpgradeResults is schema 2's migration of the plan records: the results
// a plan record or its progress record holds become directory results, an
// applying plan gets its run key, and the progress records are deleted.
// It is idempotent (migrations may run it twice).
func UpgradeResults(ctx context.Context, dir *directory.Directory) error {
	ids, err := dir.PlanIDs(ctx)
	if err != nil {
		return err
	}
	var progress []string
	for _, id := range ids {
		if strings.HasSuffix(id, legacyProgressSuffix) {
			progress = append(progress, id)
			continue
		}
		if err := upgradePlan(ctx, dir, id); err != nil {
			return fmt.Errorf("upgrade plan %s: %w", id, err)
		}
	}
	return dir.DeletePlans(ctx, progress...)
}

func upgradePlan(ctx context.Context, dir *directory.Directory, id string) error {
	b, err := dir.Plan(ctx, id)
	if errors.Is(err, directory.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	p, err := decodePlan(b)
	if err != nil {
		return nil // unreadable before the upgrade too: left as it is
	}
	if rec, err := dir.Plan(ctx, id+legacyProgressSuffix); err == nil {
		var lp legacyProgress
		if json.Unmarshal(rec, &lp) == nil && len(lp.Status) == len(p.Moves) {
			for i := range p.Moves {
				if st := legacyStatus(lp.Status[i]); st != MovePending {
					p.Moves[i].Status = st
				}
				if e, ok := lp.Errors[i]; ok {
					p.Moves[i].Error = e
				}
			}
		}
	} else if !errors.Is(err, directory.ErrNotFound) && !errors.Is(err, directory.ErrInvalid) {
		return err
	}
	for i, m := range p.Moves {
		if m.Status.runnable() && m.Error != "" {
			m.Status = MoveFailed // schema 1 kept a failed move pending, with its error
		}
		if m.Status.runnable() && m.Status != MoveFailed {
			continue
		}
		r := directory.MoveResult{Index: i, Slot: m.Slot, Status: string(m.Status), MoveID: m.MoveID, Error: m.Error, At: m.Finished}
		if err := dir.RecordResult(ctx, id, r); err != nil {
			return err
		}
	}
	if p.State != StateApplying {
		return nil
	}
	return dir.UpdatePlanRun(ctx, id, func(old []byte) ([]byte, directory.Run, error) {
		return old, directory.RunStart, nil
	})
}

func legacyStatus(b byte) MoveStatus {
	switch b {
	case 'd':
		return MoveDone
	case 's':
		return MoveSkipped
	case 'a':
		return MoveAborted
	}
	return MovePending
}
