package mover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/slotd/slotd/directory"
)

// progressSuffix names the record that holds a plan's move results,
// stored beside the plan under "<plan id>.progress". The plan record holds
// what operators change (state, edits) and is rewritten by
// compare-and-swap; the results of thousands of small moves change far
// more often, and rewriting the whole plan for them would cost more than
// the moves. Only the leading executor writes progress.
const progressSuffix = ".progress"

func isProgressID(id string) bool { return strings.HasSuffix(id, progressSuffix) }

// countPlans counts the plan records among ids, progress records left out.
func countPlans(ids iter.Seq[string]) int {
	n := 0
	for id := range ids {
		if !isProgressID(id) {
			n++
		}
	}
	return n
}

// progressRec is the stored form: one status byte per move ('p'ending,
// 'd'one, 's'kipped, 'a'borted) and the errors of the moves that have one.
type progressRec struct {
	Status string         `json:"status"`
	Errors map[int]string `json:"errors,omitempty"`
}

var statusCode = map[MoveStatus]byte{MovePending: 'p', MoveDone: 'd', MoveSkipped: 's', MoveAborted: 'a'}

func codeStatus(b byte) MoveStatus {
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

func encodeProgress(p *Plan) ([]byte, error) {
	rec := progressRec{}
	st := make([]byte, len(p.Moves))
	for i, m := range p.Moves {
		c, ok := statusCode[m.Status]
		if !ok {
			c = 'p'
		}
		st[i] = c
		if m.Error != "" {
			if rec.Errors == nil {
				rec.Errors = map[int]string{}
			}
			rec.Errors[i] = m.Error
		}
	}
	rec.Status = string(st)
	return json.Marshal(rec)
}

// mergeProgress applies a stored progress record to p's moves. A record
// of another length (a corrupt or foreign one) is ignored.
func mergeProgress(p *Plan, b []byte) error {
	var rec progressRec
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("%w: progress of %s: %v", ErrBadPlan, p.ID, err)
	}
	if len(rec.Status) != len(p.Moves) {
		return fmt.Errorf("%w: progress of %s has %d moves, plan %d", ErrBadPlan, p.ID, len(rec.Status), len(p.Moves))
	}
	for i := range p.Moves {
		if st := codeStatus(rec.Status[i]); st != MovePending || p.Moves[i].Status == "" {
			p.Moves[i].Status = st
		}
		if e, ok := rec.Errors[i]; ok {
			p.Moves[i].Error = e
		}
	}
	return nil
}

// readProgress merges plan p's progress record, if there is one.
func (c *Control) readProgress(ctx context.Context, p *Plan) error {
	b, err := c.dir.Plan(ctx, p.ID+progressSuffix)
	if errors.Is(err, directory.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return mergeProgress(p, b)
}

// writeProgress stores p's move results.
func (c *Control) writeProgress(ctx context.Context, p *Plan) error {
	b, err := encodeProgress(p)
	if err != nil {
		return err
	}
	return c.dir.PutPlan(ctx, p.ID+progressSuffix, b)
}
