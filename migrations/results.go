package migrations

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/slotd/slotd/directory"
)

// Schema 2's step: plan results move into the directory. Schema 1 kept a
// plan's move results in the plan record and in a "<plan id>.progress"
// record the leader wrote now and then; schema 2 keeps each result in the
// directory, written by the transaction that ends the move, and gives an
// applying plan its run key.
//
// The step reads plan records in the form schema 1 wrote them, described
// here rather than borrowed from the mover: the mover's plan type may
// change after schema 2, and this step must still read the records it was
// written for.

// legacyProgressSuffix named schema 1's progress records.
const legacyProgressSuffix = ".progress"

// maxLegacyPlan bounds a decoded plan record, as the mover bounds its own:
// a hostile record must not exhaust memory.
const maxLegacyPlan = 16 << 20

// legacyPlan is the part of a schema 1 plan record (gzip'd JSON) the step
// reads.
type legacyPlan struct {
	State string       `json:"state"`
	Moves []legacyMove `json:"moves"`
}

type legacyMove struct {
	Slot     int       `json:"slot"`
	Status   string    `json:"status"`
	MoveID   string    `json:"move_id,omitempty"`
	Error    string    `json:"error,omitempty"`
	Finished time.Time `json:"finished,omitzero"`
}

// legacyProgress is a schema 1 progress record: one status byte per move
// ('p'ending, 'd'one, 's'kipped, 'a'borted) and the errors of the moves that
// have one.
type legacyProgress struct {
	Status string         `json:"status"`
	Errors map[int]string `json:"errors,omitempty"`
}

// Plan and move states of schema 1's records that the step acts on.
const (
	legacyApplying = "applying"
	legacyPending  = "pending"
)

// upgradeResults is schema 2's step: the results a plan record or its
// progress record holds become directory results, an applying plan gets
// its run key, and the progress records are deleted. It is idempotent.
func upgradeResults(ctx context.Context, dir *directory.Directory) error {
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
	p, err := decodeLegacyPlan(b)
	if err != nil {
		return nil // unreadable before the upgrade too: left as it is
	}
	if rec, err := dir.Plan(ctx, id+legacyProgressSuffix); err == nil {
		var lp legacyProgress
		if json.Unmarshal(rec, &lp) == nil && len(lp.Status) == len(p.Moves) {
			for i := range p.Moves {
				if st := legacyStatus(lp.Status[i]); st != legacyPending {
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
		runnable := m.Status == legacyPending || m.Status == "" || m.Status == directory.ResultFailed
		if runnable && m.Error != "" {
			m.Status = directory.ResultFailed // schema 1 kept a failed move pending, with its error
		}
		if runnable && m.Status != directory.ResultFailed {
			continue
		}
		r := directory.MoveResult{Index: i, Slot: m.Slot, Status: m.Status, MoveID: m.MoveID, Error: m.Error, At: m.Finished}
		if err := dir.RecordResult(ctx, id, r); err != nil {
			return err
		}
	}
	if p.State != legacyApplying {
		return nil
	}
	return dir.UpdatePlanRun(ctx, id, func(old []byte) ([]byte, directory.Run, error) {
		return old, directory.RunStart, nil
	})
}

// decodeLegacyPlan reads a schema 1 plan record.
func decodeLegacyPlan(b []byte) (*legacyPlan, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxLegacyPlan+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxLegacyPlan {
		return nil, fmt.Errorf("plan record larger than %d bytes", maxLegacyPlan)
	}
	var p legacyPlan
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func legacyStatus(b byte) string {
	switch b {
	case 'd':
		return directory.ResultDone
	case 's':
		return directory.ResultSkipped
	case 'a':
		return directory.ResultAborted
	}
	return legacyPending
}
