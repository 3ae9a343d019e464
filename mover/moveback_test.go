package mover

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

// TestMoveBackBeforeDrop moves a slot away and straight back before the
// first source dropped its copy (as a rollback right after a plan does):
// the returning import clears the stale copy, so a key deleted meanwhile
// stays deleted, and the late drop of the first move is refused instead of
// deleting the new copy.
func TestMoveBackBeforeDrop(t *testing.T) {
	c := newCluster(t, 2)
	m := newSlotMover(t, c)
	keys := keysInSlots(map[int]bool{m.slot.Int(): true}, 3)
	for _, k := range keys {
		if err := c.put(c.ctx, k, []byte("v1")); err != nil {
			t.Fatal(err)
		}
	}
	first, firstVersion := m.move(t, "n1", "n2", nil)
	// n1 keeps its copy (no drop asked yet); a key is deleted on n2.
	if _, err := c.nodes["n2"].kv.Delete(c.ctx, &kvpb.DeleteRequest{Key: keys[0]}); err != nil {
		t.Fatal(err)
	}
	n1, _ := c.pool.client(c.nodes["n1"].addr)
	lateDrop := func() error {
		_, err := n1.DropSlot(c.ctx, &slotdv1.DropSlotRequest{Slot: uint32(m.slot.Int()), Version: firstVersion, MoveId: first.MoveID})
		return err
	}
	m.move(t, "n2", "n1", func() {
		// The first move's drop arrives while the slot is coming back.
		if err := lateDrop(); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("late drop during the import: %v, want FailedPrecondition", err)
		}
	})
	if err := lateDrop(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("late drop after the slot came back: %v, want FailedPrecondition", err)
	}
	if v, err := c.get(keys[0]); err == nil && v != nil {
		t.Fatalf("deleted key %q came back with %q", keys[0], v)
	}
	for _, k := range keys[1:] {
		if v, err := c.get(k); err != nil || string(v) != "v1" {
			t.Fatalf("%q = %q, %v", k, v, err)
		}
	}
}

// TestMoveBackTakesOverRunningDrop moves a slot back onto a node that is
// still slowly dropping its old copy: the import takes the drop over
// instead of waiting for it, and nothing of the returning copy is lost.
func TestMoveBackTakesOverRunningDrop(t *testing.T) {
	c := newCluster(t, 2)
	m := newSlotMover(t, c)
	keys := keysInSlots(map[int]bool{m.slot.Int(): true}, 300)
	for _, k := range keys {
		if err := c.put(c.ctx, k, []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	first, v := m.move(t, "n1", "n2", nil)
	n1, _ := c.pool.client(c.nodes["n1"].addr)
	// A drop at 1 KB/s: it would take minutes.
	if _, err := n1.DropSlot(c.ctx, &slotdv1.DropSlotRequest{Slot: uint32(m.slot.Int()), Version: v, MoveId: first.MoveID, RateBytesPerSecond: 1000}); err != nil {
		t.Fatal(err)
	}
	m.move(t, "n2", "n1", nil)
	for _, k := range keys {
		if got, err := c.get(k); err != nil || string(got) != "value" {
			t.Fatalf("%q = %q, %v after the move back", k, got, err)
		}
	}
}

// slotMover moves one slot of a test cluster directly through a slotTransfer
// (with checksum verify) and waits for the nodes to see the commit.
type slotMover struct {
	c    *cluster
	e    *Executor
	slot slots.Slot
}

func newSlotMover(t *testing.T, c *cluster) *slotMover {
	t.Helper()
	e, err := NewExecutor(ExecutorConfig{Directory: c.dir, Control: c.ctl, Etcd: c.etcd.Client(), Stores: c.pool, Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	e.throttle.Store(0)
	snap, _ := c.dir.Snapshot(c.ctx)
	mine := snap.SlotsOf("n1")
	for s := range mine.All() {
		return &slotMover{c: c, e: e, slot: s}
	}
	t.Fatal("n1 owns no slot")
	return nil
}

// move runs the move; onBatch, if set, is called after the first batch
// applied on the target.
func (m *slotMover) move(t *testing.T, from, to string, onBatch func()) (*directory.Move, uint64) {
	t.Helper()
	c := m.c
	mv, err := c.dir.BeginMove(c.ctx, directory.MoveSpec{Slot: m.slot, From: from, To: to, By: "t"})
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := c.dir.Snapshot(c.ctx)
	src, dst, err := m.e.endpoints(cur, from, to)
	if err != nil {
		t.Fatal(err)
	}
	called := false
	tr := &slotTransfer{Slot: m.slot, MoveID: mv.MoveID, Source: src.c, Target: dst.c, Fresh: true, Verify: true,
		Journal: &moveJournal{e: m.e, mv: *mv, prog: &MoveProgress{}, fencing: new(atomic.Bool)},
		Progress: func(int, int) {
			if !called && onBatch != nil {
				called = true
				onBatch()
			}
		}}
	res, err := tr.Run(c.ctx, stepCopy)
	if err != nil {
		t.Fatalf("move %s -> %s: %v", from, to, err)
	}
	waitfor.Err(c.t, 10*time.Second, "nodes see the commit", func() error {
		if o, _ := c.m.Owner(m.slot); o.Version < res.Version {
			return errStop
		}
		return nil
	})
	return mv, res.Version
}

// TestDropAfterRoundTrip moves a slot to n2 and back, then asks n2 to drop
// its copy, as the executor does after a commit: n2 once received the slot
// and must still drop it when it gives it away. (A finished import's state
// made that drop look like the late drop of an older move; it was refused
// and the copy stayed on n2 for good.)
func TestDropAfterRoundTrip(t *testing.T) {
	c, m, keys := filledSlot(t)
	m.move(t, "n1", "n2", nil)
	back, v := m.move(t, "n2", "n1", nil)
	n2, _ := c.pool.client(c.nodes["n2"].addr)
	resp, err := n2.DropSlot(c.ctx, &slotdv1.DropSlotRequest{Slot: uint32(m.slot.Int()), Version: v, MoveId: back.MoveID})
	if err != nil {
		t.Fatalf("drop on n2 after the slot went back: %v", err)
	}
	if !resp.GetStarted() {
		t.Fatal("drop on n2 not started")
	}
	waitfor.Err(c.t, 30*time.Second, "n2 drops its copy", func() error { return m.noKeysOn(c, "n2") })
	checkValues(t, c, keys)
}

// filledSlot returns a two-node cluster, a mover of one of n1's slots and
// the 20 keys written into that slot, each with value "v".
func filledSlot(t *testing.T) (*cluster, *slotMover, [][]byte) {
	t.Helper()
	c := newCluster(t, 2)
	m := newSlotMover(t, c)
	keys := keysInSlots(map[int]bool{m.slot.Int(): true}, 20)
	for _, k := range keys {
		if err := c.put(c.ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	return c, m, keys
}

// noKeysOn reports, as an error, the keys of the slot left on node id.
func (m *slotMover) noKeysOn(c *cluster, id string) error {
	cl, err := c.pool.client(c.nodes[id].addr)
	if err != nil {
		return err
	}
	st, err := cl.SlotStats(c.ctx, &slotdv1.SlotStatsRequest{Slots: []uint32{uint32(m.slot.Int())}})
	if err != nil {
		return err
	}
	for _, x := range st.GetSlots() {
		if x.GetKeys() > 0 {
			return fmt.Errorf("%d keys left on %s", x.GetKeys(), id)
		}
	}
	return nil
}

// checkValues asserts every key reads "v" from its owner.
func checkValues(t *testing.T, c *cluster, keys [][]byte) {
	t.Helper()
	for _, k := range keys {
		if got, err := c.get(k); err != nil || string(got) != "v" {
			t.Fatalf("%q = %q, %v", k, got, err)
		}
	}
}
