package directory

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// stepper applies replica steps to one slot and checks what each did.
type stepper struct {
	t    *testing.T
	d    *Directory
	slot slots.Slot
}

func (s stepper) set() (ReplicaSet, uint64) {
	s.t.Helper()
	snap, err := s.d.Snapshot(testCtx(s.t))
	if err != nil {
		s.t.Fatal(err)
	}
	return snap.Replicas(s.slot), snap.Version
}

// do applies step at the slot's current epoch and returns the set after.
func (s stepper) do(step ReplicaStep, node string) ReplicaSet {
	s.t.Helper()
	cur, _ := s.set()
	got, v, err := s.d.ChangeReplicas(testCtx(s.t), ReplicaChange{Slot: s.slot, Step: step, Node: node, ExpectEpoch: cur.Epoch, By: "test"})
	if err != nil {
		s.t.Fatalf("%s %s: %v", step, node, err)
	}
	if read, rv := s.set(); rv != v || !slices.Equal(read.ISR, got.ISR) || !slices.Equal(read.Learners, got.Learners) || read.Epoch != got.Epoch {
		s.t.Fatalf("%s %s returned %+v at %d, the table holds %+v at %d", step, node, got, v, read, rv)
	}
	return got
}

// refused applies a step that must fail with want and change nothing.
func (s stepper) refused(c ReplicaChange, want error) {
	s.t.Helper()
	before, v := s.set()
	c.Slot = s.slot
	if c.ExpectEpoch == 0 {
		c.ExpectEpoch = before.Epoch
	}
	if _, _, err := s.d.ChangeReplicas(testCtx(s.t), c); !errors.Is(err, want) {
		s.t.Fatalf("%s %s: %v, want %v", c.Step, c.Node, err, want)
	}
	after, av := s.set()
	if av != v || !slices.Equal(after.Members(), before.Members()) || after.Epoch != before.Epoch {
		s.t.Fatalf("a refused %s changed the table: %+v at %d -> %+v at %d", c.Step, before, v, after, av)
	}
}

// zoneOf returns the zone of node id.
func zoneOf(t *testing.T, snap *Snapshot, id string) string {
	t.Helper()
	n, ok := snap.Node(id)
	if !ok {
		t.Fatalf("no node %s", id)
	}
	return n.Zone
}

// TestReplicaSteps walks one slot through every step at rf 3, min_isr 2,
// over four zones: moving a replica (add a learner, join the ISR, transfer
// the primary, remove the old one), a lagging member shrunk out and
// expanded back, and every refusal the directory owes: the zone rule, the
// primary, min_isr, a stale epoch or version, a node that is not a member.
func TestReplicaSteps(t *testing.T) {
	d, snap := setupRF(t, zonedNodes("a", "a", "b", "b", "c", "c", "d", "d"), Replication{RF: 3, MinISR: 2})
	s := stepper{t: t, d: d, slot: slots.MustNew(77)}
	start := snap.Replicas(s.slot)
	used := map[string]bool{}
	for _, id := range start.ISR {
		used[zoneOf(t, snap, id)] = true
	}
	var fourth, sameZone, outsider string // a node in the free zone, one beside ISR[1], one in the free zone too
	for _, n := range snap.Nodes {
		switch {
		case !used[n.Zone] && fourth == "":
			fourth = n.ID
		case !used[n.Zone]:
			outsider = n.ID
		case n.Zone == zoneOf(t, snap, start.ISR[1]) && n.ID != start.ISR[1]:
			sameZone = n.ID
		}
	}
	primary, second, third := start.ISR[0], start.ISR[1], start.ISR[2]

	s.refused(ReplicaChange{Step: StepAddLearner, Node: sameZone}, ErrZoneConflict)
	s.refused(ReplicaChange{Step: StepAddLearner, Node: second}, ErrPrecondition)
	s.refused(ReplicaChange{Step: StepJoinISR, Node: fourth}, ErrPrecondition)
	s.refused(ReplicaChange{Step: StepAddLearner, Node: "nobody"}, ErrNotFound)
	s.refused(ReplicaChange{Step: "promote", Node: fourth}, ErrInvalid)

	got := s.do(StepAddLearner, fourth)
	if got.Epoch != 0 || !slices.Equal(got.Learners, []string{fourth}) || !slices.Equal(got.ISR, start.ISR) {
		t.Fatalf("after add-learner: %+v", got)
	}
	s.refused(ReplicaChange{Step: StepAddLearner, Node: outsider}, ErrZoneConflict) // the learner's zone counts
	s.refused(ReplicaChange{Step: StepJoinISR, Node: fourth, ExpectEpoch: 12345}, ErrConflict)
	s.refused(ReplicaChange{Step: StepJoinISR, Node: fourth, ExpectVersion: 1}, ErrConflict)

	got = s.do(StepJoinISR, fourth)
	_, v := s.set()
	if got.Epoch != v || len(got.Learners) != 0 || !slices.Equal(got.ISR, append(slices.Clone(start.ISR), fourth)) {
		t.Fatalf("after join-isr at version %d: %+v", v, got)
	}

	s.refused(ReplicaChange{Step: StepRemoveReplica, Node: primary}, ErrRemovePrimary)
	got = s.do(StepTransferPrimary, fourth)
	snap, err := d.Snapshot(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got.Primary() != fourth || snap.Owner(s.slot) != fourth || got.ISR[1] != primary || got.Epoch != snap.Version {
		t.Fatalf("after transfer-primary: %+v, owner %s at %d", got, snap.Owner(s.slot), snap.Version)
	}
	hist, err := d.History(testCtx(t), 1)
	if err != nil || hist[0].Kind != string(StepTransferPrimary) || hist[0].From != primary || hist[0].To != fourth || hist[0].Slot != s.slot {
		t.Fatalf("history of the transfer: %+v, %v", hist, err)
	}

	got = s.do(StepRemoveReplica, primary)
	if !slices.Equal(got.ISR, []string{fourth, second, third}) {
		t.Fatalf("after remove-replica: %+v", got)
	}
	got = s.do(StepShrinkISR, third)
	if !slices.Equal(got.ISR, []string{fourth, second}) || !slices.Equal(got.Learners, []string{third}) {
		t.Fatalf("after shrink-isr: %+v", got)
	}
	if snap, err = d.Snapshot(testCtx(t)); err != nil || snap.ReplicaHealth() != (ReplicaHealth{UnderReplicated: 1, WithLearners: 1}) {
		t.Fatalf("health after shrink-isr: %+v, %v", snap.ReplicaHealth(), err)
	}
	s.refused(ReplicaChange{Step: StepShrinkISR, Node: second}, ErrBelowMinISR)
	s.refused(ReplicaChange{Step: StepRemoveReplica, Node: second}, ErrBelowMinISR)
	// min_isr 3 no longer fits this slot's ISR of 2.
	if _, _, err := d.SetReplication(testCtx(t), ReplicationSpec{RF: ptr(3), MinISR: ptr(3)}); !errors.Is(err, ErrBelowMinISR) {
		t.Fatalf("min_isr 3 with an ISR of 2: %v, want ErrBelowMinISR", err)
	}
	got = s.do(StepExpandISR, third)
	if !slices.Equal(got.ISR, []string{fourth, second, third}) || len(got.Learners) != 0 {
		t.Fatalf("after expand-isr: %+v", got)
	}

	// Steps are history, not audit.
	es, err := d.Audit(testCtx(t), AuditQuery{Kind: AuditCluster})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if isReplicaStep(e.Action) {
			t.Fatalf("replica step audited: %+v", e)
		}
	}
	// The node holds replicas: it cannot be removed, and a slot with a
	// set cannot move as one owner.
	if _, err := d.Drain(testCtx(t), third, "", "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RemoveNode(testCtx(t), third, "", "t"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("remove a node holding replicas: %v, want ErrPrecondition", err)
	}
	if _, err := d.BeginMove(testCtx(t), MoveSpec{Slot: s.slot, From: fourth, To: outsider}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("one-owner move of a slot with replicas: %v, want ErrPrecondition", err)
	}
}

// TestReplicaStepsZoneRuleInTxn: two learners of one zone added at once,
// on the same epoch: exactly one gets in, whichever transaction comes
// second sees the first and refuses.
func TestReplicaStepsZoneRuleInTxn(t *testing.T) {
	d, snap := setupRF(t, zonedNodes("a", "b", "c", "d", "d", "d"), Replication{RF: 3, MinISR: 2})
	// A slot with no replica in zone d, so any of n3, n4, n5 may join.
	sl := -1
	for i, set := range snap.ReplicaSets() {
		if !set.Has("n3") && !set.Has("n4") && !set.Has("n5") {
			sl = i
			break
		}
	}
	if sl < 0 {
		t.Fatal("no slot without a replica in zone d")
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, id := range []string{"n3", "n4", "n5"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = d.ChangeReplicas(testCtx(t), ReplicaChange{Slot: slots.MustNew(sl), Step: StepAddLearner, Node: id})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrZoneConflict):
			t.Fatalf("concurrent add-learner: %v, want success or ErrZoneConflict", err)
		}
	}
	after, err := d.Snapshot(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if set := after.Replicas(slots.MustNew(sl)); ok != 1 || len(set.Learners) != 1 {
		t.Fatalf("%d of 3 concurrent learners in one zone got in; set %+v", ok, set)
	}
}

// TestReplicaStepsNeedZonesAndStableSlots: at rf 1 with nodes without
// zones, a second replica is refused for want of a zone; a slot that is
// moving takes no step; a one-owner move of a slot whose set is its owner
// alone ends with the new owner alone.
func TestReplicaStepsNeedZonesAndStableSlots(t *testing.T) {
	d := newDir(t, etcdtest.New(t), nil)
	ctx := testCtx(t)
	snap, err := d.Bootstrap(ctx, zonedNodes("", "", "z"), 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	sl := slots.MustNew(ownerSlot(t, snap, "n0"))
	other := "n1"
	if _, _, err := d.ChangeReplicas(ctx, ReplicaChange{Slot: sl, Step: StepAddLearner, Node: other}); !errors.Is(err, ErrNoZone) {
		t.Fatalf("a second replica without zones: %v, want ErrNoZone", err)
	}
	mv, err := d.BeginMove(ctx, MoveSpec{Slot: sl, From: "n0", To: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.ChangeReplicas(ctx, ReplicaChange{Slot: sl, Step: StepAddLearner, Node: "n2"}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("a step on a moving slot: %v, want ErrPrecondition", err)
	}
	if _, err := d.CommitFencedMove(ctx, sl, mv.MoveID, "t", Copied{}); err != nil {
		t.Fatal(err)
	}
	after, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if set := after.Replicas(sl); !slices.Equal(set.ISR, []string{"n2"}) || set.Epoch != 0 || after.StoredReplicaSets() != 0 {
		t.Fatalf("after the move: %+v, %d stored sets", set, after.StoredReplicaSets())
	}
}

// TestReindexRefusedWithReplicaSets: renumbering the nodes would rewrite
// the owners and every stored set, more than one transaction holds: it is
// refused, and changes nothing.
func TestReindexRefusedWithReplicaSets(t *testing.T) {
	d, _ := setupRF(t, zonedNodes("a", "b", "c"), Replication{RF: 3, MinISR: 2})
	ctx := testCtx(t)
	// "a0" sorts first: renumbering in id order would change every index.
	if _, err := d.RegisterNode(ctx, Node{ID: "a0", Addr: "127.0.0.1:7100", Zone: "a", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	v := mustVersion(t, d)
	if _, err := d.ReindexNodes(ctx, "test"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("reindex with replica sets: %v, want ErrPrecondition", err)
	}
	if got := mustVersion(t, d); got != v {
		t.Fatalf("a refused reindex changed the version %d -> %d", v, got)
	}
}
