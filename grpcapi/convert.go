package grpcapi

import (
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/mover/planner"
)

func stateProto(s directory.NodeState) slotdv1.NodeState {
	switch s {
	case directory.NodeActive:
		return slotdv1.NodeState_NODE_STATE_ACTIVE
	case directory.NodeDraining:
		return slotdv1.NodeState_NODE_STATE_DRAINING
	case directory.NodeDown:
		return slotdv1.NodeState_NODE_STATE_DOWN
	}
	return slotdv1.NodeState_NODE_STATE_UNSPECIFIED
}

func phaseProto(p directory.Phase) slotdv1.MovePhase {
	switch p {
	case directory.PhaseCopy:
		return slotdv1.MovePhase_MOVE_PHASE_COPYING
	case directory.PhaseCatchup:
		return slotdv1.MovePhase_MOVE_PHASE_CATCHING_UP
	case directory.PhaseFenced:
		return slotdv1.MovePhase_MOVE_PHASE_FENCED
	}
	return slotdv1.MovePhase_MOVE_PHASE_UNSPECIFIED
}

func nodeProto(n directory.Node) *slotdv1.Node {
	return &slotdv1.Node{Id: n.ID, Address: n.Addr, Zone: n.Zone, Weight: uint32(n.Weight), State: stateProto(n.State)}
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

var planStates = map[mover.PlanState]slotdv1.PlanState{
	mover.StateProposed:   slotdv1.PlanState_PLAN_STATE_PROPOSED,
	mover.StateApplying:   slotdv1.PlanState_PLAN_STATE_APPLYING,
	mover.StatePaused:     slotdv1.PlanState_PLAN_STATE_PAUSED,
	mover.StateDone:       slotdv1.PlanState_PLAN_STATE_DONE,
	mover.StateCancelled:  slotdv1.PlanState_PLAN_STATE_CANCELLED,
	mover.StateRolledBack: slotdv1.PlanState_PLAN_STATE_ROLLED_BACK,
	mover.StateFailed:     slotdv1.PlanState_PLAN_STATE_FAILED,
}

func editsProto(e mover.Edits) *slotdv1.PlanEdits {
	if e.Empty() {
		return nil
	}
	pe := &slotdv1.PlanEdits{Drain: slices.Clone(e.Drain)}
	for _, n := range e.Add {
		pe.Add = append(pe.Add, &slotdv1.NodeSpec{Id: n.ID, Address: n.Addr, Zone: n.Zone, Weight: uint32(n.Weight)})
	}
	if len(e.Weights) > 0 {
		pe.Weights = make(map[string]uint32, len(e.Weights))
		for id, w := range e.Weights {
			pe.Weights[id] = uint32(w)
		}
	}
	return pe
}

func editsFrom(add []*slotdv1.NodeSpec, drain []string, weights map[string]uint32) mover.Edits {
	e := mover.Edits{Drain: slices.Clone(drain)}
	for _, n := range add {
		e.Add = append(e.Add, mover.NodeSpec{ID: n.GetId(), Addr: n.GetAddress(), Zone: n.GetZone(), Weight: int(n.GetWeight())})
	}
	if len(weights) > 0 {
		e.Weights = make(map[string]int, len(weights))
		for _, id := range slices.Sorted(maps.Keys(weights)) {
			e.Weights[id] = int(weights[id])
		}
	}
	return e
}

// movedProto is one planned move. A move in flight carries the phase the
// directory records for it (pass nil when unknown).
func movedProto(planID string, m mover.PlannedMove, inFlight *directory.Move) *slotdv1.PlannedMove {
	pm := &slotdv1.PlannedMove{
		Id: m.MoveID, Slot: uint32(m.Slot), From: m.From, To: m.To, Bytes: uint64(max(m.Bytes, 0)),
		Reason: m.Reason, StartedAt: ts(m.Started), FinishedAt: ts(m.Finished), Error: m.Error, PlanId: planID,
	}
	switch m.Status {
	case mover.MoveDone:
		pm.Phase, pm.BytesCopied = slotdv1.MovePhase_MOVE_PHASE_COMMITTED, uint64(max(m.Copied, 0))
	case mover.MoveSkipped:
		pm.Phase, pm.Skipped = slotdv1.MovePhase_MOVE_PHASE_COMMITTED, true
	case mover.MoveAborted:
		pm.Phase = slotdv1.MovePhase_MOVE_PHASE_ABORTED
	case mover.MoveFailed:
		pm.Phase, pm.Failed = slotdv1.MovePhase_MOVE_PHASE_ABORTED, true
		if inFlight != nil { // resumed: running again
			pm.Phase, pm.Failed = phaseProto(inFlight.Phase), false
			pm.Id, pm.StartedAt = inFlight.MoveID, ts(inFlight.Started)
		}
	default:
		pm.Phase = slotdv1.MovePhase_MOVE_PHASE_PENDING
		if inFlight != nil {
			pm.Phase = phaseProto(inFlight.Phase)
			pm.Id = inFlight.MoveID
			pm.StartedAt = ts(inFlight.Started)
		}
	}
	return pm
}

// planProto converts a plan record. withMoves false leaves the moves out
// (plan lists). inFlight maps slot -> the directory's move in flight.
func planProto(p *mover.Plan, withMoves bool, inFlight map[int]directory.Move) *slotdv1.Plan {
	pr := p.Progress()
	out := &slotdv1.Plan{
		Id: p.ID, BaseVersion: p.BaseVersion, TotalBytes: uint64(max(p.TotalBytes, 0)),
		Estimated: durationpb.New(p.Estimate), State: planStates[p.State], Operator: p.Operator, Reason: p.Reason,
		CreatedAt: ts(p.Created), UpdatedAt: ts(p.Updated), RollbackOf: p.RollbackOf, RolledBackBy: p.RolledBackBy,
		Error: p.Error, Edits: editsProto(p.Edits), SizesUnknown: p.SizesUnknown, BytesEstimated: true,
		Progress: &slotdv1.PlanProgress{
			Moves: uint32(pr.Moves), Done: uint32(pr.Done), Skipped: uint32(pr.Skipped), Aborted: uint32(pr.Aborted),
			Pending: uint32(pr.Pending), Bytes: uint64(max(pr.Bytes, 0)), BytesDone: uint64(max(pr.BytesDone, 0)),
			Failed: uint32(pr.Failed), BytesCopied: uint64(max(pr.BytesCopied, 0)),
		},
	}
	for _, n := range p.Nodes {
		out.Nodes = append(out.Nodes, &slotdv1.NodeBalance{
			NodeId: n.ID, SlotsBefore: uint32(max(n.SlotsBefore, 0)), SlotsAfter: uint32(max(n.SlotsAfter, 0)),
			TargetSlots: uint32(max(n.TargetSlots, 0)),
			BytesBefore: uint64(max(n.BytesBefore, 0)), BytesAfter: uint64(max(n.BytesAfter, 0)),
		})
	}
	loadProto(p, out)
	if withMoves {
		out.Moves = make([]*slotdv1.PlannedMove, len(p.Moves))
		for i, m := range p.Moves {
			var fl *directory.Move
			if mv, ok := inFlight[m.Slot]; ok && mv.PlanID == p.ID {
				fl = &mv
			}
			out.Moves[i] = movedProto(p.ID, m, fl)
		}
	}
	return out
}

// PlanFromProto reads a plan file's plan (see Admin.SubmitPlan): its id,
// base version, edits, reason and the moves' slot, from, to, bytes and
// reason. Everything about progress is left out; mover.Control.Submit
// validates the rest.
func PlanFromProto(pb *slotdv1.Plan) *mover.Plan {
	p := &mover.Plan{ID: pb.GetId(), BaseVersion: pb.GetBaseVersion(), Reason: pb.GetReason()}
	if e := pb.GetEdits(); e != nil {
		p.Edits = editsFrom(e.GetAdd(), e.GetDrain(), e.GetWeights())
	}
	for _, m := range pb.GetMoves() {
		p.Moves = append(p.Moves, mover.PlannedMove{
			Slot: int(m.GetSlot()), From: m.GetFrom(), To: m.GetTo(), Bytes: int64(min(m.GetBytes(), 1<<62)), Reason: m.GetReason(),
		})
		p.TotalBytes += int64(min(m.GetBytes(), 1<<40))
	}
	for _, n := range pb.GetNodes() {
		p.Nodes = append(p.Nodes, planner.NodeChange{
			ID: n.GetNodeId(), SlotsBefore: int(n.GetSlotsBefore()), SlotsAfter: int(n.GetSlotsAfter()), TargetSlots: int(n.GetTargetSlots()),
			BytesBefore: int64(min(n.GetBytesBefore(), 1<<62)), BytesAfter: int64(min(n.GetBytesAfter(), 1<<62)),
		})
	}
	loadFromProto(pb, p)
	if d := pb.GetEstimated(); d != nil {
		p.Estimate = d.AsDuration()
	}
	return p
}

var historyKinds = map[string]slotdv1.HistoryKind{
	directory.ChangeBootstrap:    slotdv1.HistoryKind_HISTORY_KIND_BOOTSTRAP,
	directory.ChangeNodeRegister: slotdv1.HistoryKind_HISTORY_KIND_NODE_ADDED,
	directory.ChangeNodeAddr:     slotdv1.HistoryKind_HISTORY_KIND_NODE_CHANGED,
	directory.ChangeNodeWeight:   slotdv1.HistoryKind_HISTORY_KIND_NODE_CHANGED,
	directory.ChangeNodeDrain:    slotdv1.HistoryKind_HISTORY_KIND_NODE_CHANGED,
	directory.ChangeNodeUndrain:  slotdv1.HistoryKind_HISTORY_KIND_NODE_CHANGED,
	directory.ChangeNodeDown:     slotdv1.HistoryKind_HISTORY_KIND_NODE_CHANGED,
	directory.ChangeNodeUp:       slotdv1.HistoryKind_HISTORY_KIND_NODE_CHANGED,
	directory.ChangeReindexNodes: slotdv1.HistoryKind_HISTORY_KIND_NODE_CHANGED,
	directory.ChangeNodeRemove:   slotdv1.HistoryKind_HISTORY_KIND_NODE_REMOVED,
	directory.ChangeNodeFail:     slotdv1.HistoryKind_HISTORY_KIND_NODE_REMOVED,
	directory.ChangeMoveBegin:    slotdv1.HistoryKind_HISTORY_KIND_MOVE_STARTED,
	directory.ChangeMoveAdvance:  slotdv1.HistoryKind_HISTORY_KIND_MOVE_PHASE,
	directory.ChangeMoveCommit:   slotdv1.HistoryKind_HISTORY_KIND_SLOT_MOVED,
	directory.ChangeMoveAbort:    slotdv1.HistoryKind_HISTORY_KIND_MOVE_ABORTED,
}

func historyProto(c directory.Change) *slotdv1.HistoryEntry {
	e := &slotdv1.HistoryEntry{
		Version: c.Version, Time: ts(c.At), Kind: historyKinds[c.Kind], NodeId: c.Node,
		MoveId: c.MoveID, PlanId: c.PlanID, Operator: c.By, Reason: c.Reason,
	}
	if c.MoveID != "" {
		e.Slot, e.From, e.To = uint32(c.Slot.Uint16()), c.From, c.To
	}
	if c.Kind == directory.ChangeMoveAdvance && c.Phase != "" {
		// The entry has no phase field; the reason says where the move went.
		if e.Reason == "" {
			e.Reason = "phase " + string(c.Phase)
		} else {
			e.Reason = "phase " + string(c.Phase) + ": " + e.Reason
		}
	}
	return e
}
