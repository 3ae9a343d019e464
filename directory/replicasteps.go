package directory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/slotd/slotd/slots"
)

// ReplicaStep is one change to a slot's replica set: one transaction at a
// new version, recorded in history under the step's name
// (docs/replication.md, "Mover steps").
type ReplicaStep string

// The steps. The epoch moves to the step's version whenever the primary or
// the ISR changes.
const (
	// StepAddLearner adds a learner: a replica being filled, not in the ISR.
	StepAddLearner ReplicaStep = "add-learner"
	// StepJoinISR takes a learner that caught up into the ISR.
	StepJoinISR ReplicaStep = "join-isr"
	// StepTransferPrimary makes an ISR member the primary (and the owner);
	// the old primary stays in the ISR, second.
	StepTransferPrimary ReplicaStep = "transfer-primary"
	// StepRemoveReplica removes a learner or an ISR member other than the
	// primary.
	StepRemoveReplica ReplicaStep = "remove-replica"
	// StepShrinkISR turns an ISR member that lags into a learner.
	StepShrinkISR ReplicaStep = "shrink-isr"
	// StepExpandISR takes a learner that caught up again into the ISR.
	StepExpandISR ReplicaStep = "expand-isr"
)

var replicaSteps = []ReplicaStep{StepAddLearner, StepJoinISR, StepTransferPrimary, StepRemoveReplica, StepShrinkISR, StepExpandISR}

// isReplicaStep reports whether a history kind is a replica step.
func isReplicaStep(kind string) bool { return slices.Contains(replicaSteps, ReplicaStep(kind)) }

// ReplicaChange asks for one step on one slot's set.
type ReplicaChange struct {
	Slot slots.Slot
	Step ReplicaStep
	// Node is the replica the step is about: the learner added, the
	// member joining or leaving the ISR, the new primary, the replica
	// removed.
	Node string
	// ExpectEpoch is the slot's epoch the caller decided on (0 for a set
	// that is its owner alone, as read): any other is ErrConflict.
	ExpectEpoch uint64
	// ExpectVersion, when non-zero, applies the step only at this version;
	// ErrConflict otherwise. Zero re-checks the step on the newest table
	// when another change wins a race.
	ExpectVersion uint64
	// PlanID names the plan the step belongs to, for history.
	PlanID string
	Reason string
	By     string
}

// ChangeReplicas applies one step to one slot's set in one versioned
// transaction and returns the set after it and the version. Every step
// checks, in that transaction: the slot is not moving, its epoch is
// c.ExpectEpoch, no two replicas share a zone (ErrZoneConflict; ErrNoZone
// for a member without one), the ISR keeps min_isr members
// (ErrBelowMinISR), the primary stays (ErrRemovePrimary). Other errors:
// ErrInvalid, ErrNotFound (unknown node), ErrPrecondition (the step does
// not apply: a learner that is already a replica, a node that is not
// active, ...), ErrConflict, ErrNotBootstrapped.
func (d *Directory) ChangeReplicas(ctx context.Context, c ReplicaChange) (ReplicaSet, uint64, error) {
	op := fmt.Sprintf("%s %s on slot %d", c.Step, c.Node, c.Slot.Int())
	if !slices.Contains(replicaSteps, c.Step) {
		return ReplicaSet{}, 0, fmt.Errorf("%s: %w: unknown replica step %q", op, ErrInvalid, c.Step)
	}
	if err := checkID("node id", c.Node); err != nil {
		return ReplicaSet{}, 0, fmt.Errorf("%s: %w", op, err)
	}
	if c.PlanID != "" {
		if err := checkID("plan id", c.PlanID); err != nil {
			return ReplicaSet{}, 0, fmt.Errorf("%s: %w", op, err)
		}
	}
	if err := checkText(c.Reason, c.By); err != nil {
		return ReplicaSet{}, 0, fmt.Errorf("%s: %w", op, err)
	}
	var out ReplicaSet
	v, err := d.update(ctx, op, updateOpts{expect: c.ExpectVersion, needBootstrap: true}, func(st *state, m *mutation) error {
		s := c.Slot.Int()
		if mv, ok := st.moves[uint16(s)]; ok {
			return fmt.Errorf("%w: slot %d is moving (%s, %s -> %s): one change per slot at a time", ErrPrecondition, s, mv.MoveID, mv.From, mv.To)
		}
		n, ok := st.nodes[c.Node]
		if !ok {
			return fmt.Errorf("%w: node %q is not registered", ErrNotFound, c.Node)
		}
		cur := st.setOf(s)
		if cur.epoch != c.ExpectEpoch {
			return fmt.Errorf("%w: slot %d is at epoch %d, not %d; re-read its set", ErrConflict, s, cur.epoch, c.ExpectEpoch)
		}
		next, err := st.step(cur, c.Step, n)
		if err != nil {
			return fmt.Errorf("slot %d: %w", s, err)
		}
		if err := st.checkSet(s, next); err != nil {
			return err
		}
		if next.isr[0] != cur.isr[0] {
			st.owners[s] = next.isr[0]
			m.chunk(s)
		}
		if next.epoch == 0 && len(next.isr) == 1 && len(next.learners) == 0 {
			next = nil // its owner alone, as it was before any step: implied
		}
		st.setReplicas(m, s, next)
		m.change = Change{Kind: string(c.Step), Node: c.Node, PlanID: c.PlanID, By: c.By, Reason: st.describe(s, c.Reason)}
		if c.Step == StepTransferPrimary {
			m.change.From, m.change.To = st.idOf(cur.isr[0]), c.Node
		}
		m.slot(uint16(s))
		out = st.setOf(s).withIDs(s, st.idOf)
		return nil
	})
	if err != nil {
		return ReplicaSet{}, 0, err
	}
	d.lg.Info("replica set changed", "slot", c.Slot.Int(), "step", string(c.Step), "node", c.Node, "version", v,
		"epoch", out.Epoch, "isr", out.ISR, "learners", out.Learners, "by", c.By)
	return out, v, nil
}

// step returns cur with step applied for node n, or why it does not apply.
func (st *state) step(cur *replicaRec, step ReplicaStep, n *nodeRec) (*replicaRec, error) {
	inISR, isLearner := slices.Contains(cur.isr, n.Index), slices.Contains(cur.learners, n.Index)
	next := &replicaRec{epoch: cur.epoch, isr: slices.Clone(cur.isr), learners: slices.Clone(cur.learners)}
	switch step {
	case StepAddLearner:
		if inISR || isLearner {
			return nil, fmt.Errorf("%w: node %q is already a replica", ErrPrecondition, n.ID)
		}
		if n.state() != NodeActive {
			return nil, fmt.Errorf("%w: node %q is %s; only active nodes receive replicas", ErrPrecondition, n.ID, n.state())
		}
		next.learners = append(next.learners, n.Index)
		return next, nil
	case StepJoinISR, StepExpandISR:
		if !isLearner {
			return nil, fmt.Errorf("%w: node %q is not a learner of the slot", ErrPrecondition, n.ID)
		}
		if n.Down {
			return nil, fmt.Errorf("%w: node %q is down; a down replica cannot be in sync", ErrPrecondition, n.ID)
		}
		next.learners = slices.DeleteFunc(next.learners, func(i uint16) bool { return i == n.Index })
		next.isr = append(next.isr, n.Index)
	case StepTransferPrimary:
		if !inISR || cur.isr[0] == n.Index {
			return nil, fmt.Errorf("%w: node %q is not an in-sync replica other than the primary", ErrPrecondition, n.ID)
		}
		if n.state() != NodeActive {
			return nil, fmt.Errorf("%w: node %q is %s; only an active node becomes primary", ErrPrecondition, n.ID, n.state())
		}
		rest := slices.DeleteFunc(next.isr, func(i uint16) bool { return i == n.Index })
		next.isr = append([]uint16{n.Index}, rest...)
	case StepRemoveReplica, StepShrinkISR:
		if cur.isr[0] == n.Index {
			return nil, fmt.Errorf("%w: node %q is the primary; transfer the primary first", ErrRemovePrimary, n.ID)
		}
		if !inISR && (step == StepShrinkISR || !isLearner) {
			return nil, fmt.Errorf("%w: node %q is not %s of the slot", ErrPrecondition, n.ID, map[bool]string{true: "an in-sync replica", false: "a replica"}[step == StepShrinkISR])
		}
		if !inISR { // a learner leaves: the ISR and the epoch stay
			next.learners = slices.DeleteFunc(next.learners, func(i uint16) bool { return i == n.Index })
			return next, nil
		}
		if len(cur.isr)-1 < st.policy.MinISR {
			return nil, fmt.Errorf("%w: node %q leaving would leave %d in-sync replicas, below min_isr %d", ErrBelowMinISR, n.ID, len(cur.isr)-1, st.policy.MinISR)
		}
		next.isr = slices.DeleteFunc(next.isr, func(i uint16) bool { return i == n.Index })
		if step == StepShrinkISR {
			next.learners = append(next.learners, n.Index)
		}
	}
	next.epoch = st.next
	return next, nil
}

// checkSet says whether r is a valid set for slot s: registered, distinct
// members in distinct zones (a set of more than one needs a zone on each).
func (st *state) checkSet(s int, r *replicaRec) error {
	members := r.members()
	if len(members) == 1 {
		return nil
	}
	byIdx := st.byIndex()
	zones := map[string]string{}
	for _, idx := range members {
		n, ok := byIdx[idx]
		if !ok {
			return fmt.Errorf("%w: slot %d names node index %d, which is no node's", ErrPrecondition, s, idx)
		}
		if n.Zone == "" {
			return fmt.Errorf("%w: slot %d would have %d replicas and node %q has no zone; give it one", ErrNoZone, s, len(members), n.ID)
		}
		if other, ok := zones[n.Zone]; ok {
			return fmt.Errorf("%w: slot %d would have replicas on %s and %s, both in zone %s", ErrZoneConflict, s, other, n.ID, n.Zone)
		}
		zones[n.Zone] = n.ID
	}
	return nil
}

// byIndex maps node indexes to records.
func (st *state) byIndex() map[uint16]*nodeRec {
	out := make(map[uint16]*nodeRec, len(st.nodes))
	for _, n := range st.nodes {
		out[n.Index] = n
	}
	return out
}

// idOf returns the id of the node at index idx ("" for none).
func (st *state) idOf(idx uint16) string {
	for _, n := range st.nodes {
		if n.Index == idx {
			return n.ID
		}
	}
	return ""
}

// describe says what a set is after a step, after the caller's reason.
func (st *state) describe(s int, reason string) string {
	r := st.setOf(s).withIDs(s, st.idOf)
	d := fmt.Sprintf("isr [%s] learners [%s] epoch %d", strings.Join(r.ISR, ","), strings.Join(r.Learners, ","), r.Epoch)
	if reason != "" {
		d = reason + "; " + d
	}
	return d
}
