package mover

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover/planner"
)

// PlanState is where a plan stands.
type PlanState string

// Plan states. Proposed plans wait for Apply; one plan at a time is
// applying or paused; done, cancelled, rolled back and failed are final.
const (
	StateProposed   PlanState = "proposed"
	StateApplying   PlanState = "applying"
	StatePaused     PlanState = "paused"
	StateDone       PlanState = "done"
	StateCancelled  PlanState = "cancelled"
	StateRolledBack PlanState = "rolled_back"
	StateFailed     PlanState = "failed"
)

// Active reports whether the state still has moves to run.
func (s PlanState) Active() bool { return s == StateApplying || s == StatePaused }

// final reports whether the state can no longer change (but for a final
// plan being marked rolled back).
func (s PlanState) final() bool {
	return s == StateDone || s == StateCancelled || s == StateRolledBack || s == StateFailed
}

// MoveStatus is where one move of a plan stands.
type MoveStatus string

// Move statuses.
const (
	MovePending MoveStatus = "pending"
	MoveDone    MoveStatus = directory.ResultDone
	// MoveSkipped: nothing to do when its turn came (the slot had the
	// target as owner already); Error says why. Nothing was copied.
	MoveSkipped MoveStatus = directory.ResultSkipped
	// MoveAborted: the move was undone for good (its plan was cancelled);
	// the source kept the slot.
	MoveAborted MoveStatus = directory.ResultAborted
	// MoveFailed: the move failed and was undone; the source kept the slot
	// and Error says why. Resuming the plan tries it again.
	MoveFailed MoveStatus = directory.ResultFailed
)

// runnable reports whether a move with this status is still to run: one
// that failed runs again when its plan is resumed.
func (s MoveStatus) runnable() bool { return s == MovePending || s == "" || s == MoveFailed }

// NodeSpec is a node a plan adds.
type NodeSpec struct {
	ID     string `json:"id"`
	Addr   string `json:"addr"`
	Zone   string `json:"zone,omitempty"`
	Weight int    `json:"weight"`
}

// Edits are the node changes a plan was computed for; Apply makes them in
// the directory before the first move.
type Edits struct {
	Add     []NodeSpec     `json:"add,omitempty"`
	Drain   []string       `json:"drain,omitempty"`
	Weights map[string]int `json:"weights,omitempty"`
}

// Empty reports whether there are no edits.
func (e Edits) Empty() bool { return len(e.Add) == 0 && len(e.Drain) == 0 && len(e.Weights) == 0 }

// PlannedMove is one single-slot move of a plan and how it went.
type PlannedMove struct {
	Slot   int        `json:"slot"`
	From   string     `json:"from"`
	To     string     `json:"to"`
	Bytes  int64      `json:"bytes"` // estimated before the move
	Reason string     `json:"reason"`
	Status MoveStatus `json:"status"`
	MoveID string     `json:"move_id,omitempty"`
	Error  string     `json:"error,omitempty"`
	// Copied is what the transfer applied on the target (done moves).
	Copied   int64     `json:"copied,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
}

// Plan is a plan as stored in the directory and shown to operators. Its
// JSON form is the plan file `slotctl plan -o json` writes.
type Plan struct {
	ID           string               `json:"id"`
	BaseVersion  uint64               `json:"base_version"`
	State        PlanState            `json:"state"`
	Operator     string               `json:"operator,omitempty"`
	Reason       string               `json:"reason,omitempty"`
	Created      time.Time            `json:"created"`
	Updated      time.Time            `json:"updated"`
	Edits        Edits                `json:"edits,omitzero"`
	Moves        []PlannedMove        `json:"moves"`
	Nodes        []planner.NodeChange `json:"nodes"`
	TotalBytes   int64                `json:"total_bytes"`
	Estimate     time.Duration        `json:"estimate_ns"`
	Throttle     int64                `json:"throttle_bytes_per_second"`
	RollbackOf   string               `json:"rollback_of,omitempty"`
	RolledBackBy string               `json:"rolled_back_by,omitempty"`
	// PrevWeights holds the weights Apply replaced, so a rollback restores
	// them.
	PrevWeights map[string]int `json:"prev_weights,omitempty"`
	// AbortCurrent asks the mover to abort the move in flight rather than
	// finish it when the plan is paused or cancelled.
	AbortCurrent bool `json:"abort_current,omitempty"`
	// Error says why the plan paused or failed on its own.
	Error string `json:"error,omitempty"`
	// What the planner balanced and what it could not (planner.Plan's
	// fields of the same names): the mode, its dead band, why the plan ends
	// where it does, nodes of unknown load, hot spots, slots of down nodes.
	BalanceBy planner.BalanceBy `json:"balance_by,omitempty"`
	Tolerance float64           `json:"tolerance,omitempty"`
	Note      string            `json:"note,omitempty"`
	Unknown   []string          `json:"unknown,omitempty"`
	HotSpots  []planner.HotSpot `json:"hot_spots,omitempty"`
	Blocked   []planner.Blocked `json:"blocked,omitempty"`
	// SizesUnknown names the nodes that could not be asked for slot sizes
	// when the plan was made: its bytes are then unknown, not zero.
	SizesUnknown []string `json:"sizes_unknown,omitempty"`
}

// clone returns a deep copy of p.
func (p *Plan) clone() *Plan {
	q := *p
	q.Moves = slices.Clone(p.Moves)
	q.Nodes = slices.Clone(p.Nodes)
	q.Unknown = slices.Clone(p.Unknown)
	q.HotSpots = slices.Clone(p.HotSpots)
	q.Blocked = slices.Clone(p.Blocked)
	q.Edits.Add = slices.Clone(p.Edits.Add)
	q.Edits.Drain = slices.Clone(p.Edits.Drain)
	q.Edits.Weights = maps.Clone(p.Edits.Weights)
	q.PrevWeights = maps.Clone(p.PrevWeights)
	return &q
}

// Progress counts the moves and bytes of a plan by status. Bytes and
// BytesDone are the planner's estimates (of all moves, of the done ones);
// BytesCopied is what the done moves' transfers copied.
type Progress struct {
	Moves, Done, Skipped, Aborted, Failed, Pending int
	Bytes, BytesDone, BytesCopied                  int64
}

// Progress returns the plan's counts.
func (p *Plan) Progress() Progress {
	var pr Progress
	pr.Moves = len(p.Moves)
	pr.Bytes = p.TotalBytes
	for _, m := range p.Moves {
		switch m.Status {
		case MoveDone:
			pr.Done++
			pr.BytesDone += m.Bytes
			pr.BytesCopied += m.Copied
		case MoveSkipped:
			pr.Skipped++
		case MoveAborted:
			pr.Aborted++
		case MoveFailed:
			pr.Failed++
		default:
			pr.Pending++
		}
	}
	return pr
}

// nextN returns the indexes of the first n pending moves, in plan order.
func (p *Plan) nextN(n int) []int {
	var out []int
	for i, m := range p.Moves {
		if len(out) == n {
			break
		}
		if m.Status.runnable() {
			out = append(out, i)
		}
	}
	return out
}

// ErrBadPlan marks a stored or submitted plan that cannot be read.
var ErrBadPlan = errors.New("mover: malformed plan")

// encodePlan is the stored form: gzipped JSON, which keeps a plan of 16,384
// moves well under etcd's request limit.
func encodePlan(p *Plan) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	if err := json.NewEncoder(zw).Encode(p); err != nil {
		return nil, fmt.Errorf("encode plan %s: %w", p.ID, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode plan %s: %w", p.ID, err)
	}
	return buf.Bytes(), nil
}

// gzipWriters recycles compressors: making one allocates about a megabyte
// of tables, which was most of the cost of storing a small plan
// (0.7 ms; reused, the encoding of a one-move plan takes microseconds).
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
	return zw
}}

// maxPlanJSON bounds a decoded plan, so a hostile record cannot exhaust
// memory (16,384 moves take about 3 MiB of JSON).
const maxPlanJSON = 16 << 20

func decodePlan(b []byte) (*Plan, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPlan, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxPlanJSON+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPlan, err)
	}
	if len(raw) > maxPlanJSON {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadPlan, maxPlanJSON)
	}
	var p Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPlan, err)
	}
	return &p, nil
}
