package mover

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

// slowSlot fills one of n1's slots with about 200 KiB and throttles the
// mover to 100 KB/s, so that its copy takes about two seconds.
func slowSlot(t *testing.T, c *cluster) (slots.Slot, [][]byte) {
	t.Helper()
	snap, _ := c.dir.Snapshot(c.ctx)
	mine := snap.SlotsOf("n1")
	slot := mine.Ranges()[0].From
	keys := keysInSlots(map[int]bool{slot.Int(): true}, 200)
	for _, k := range keys {
		if err := c.put(c.ctx, k, bytes.Repeat(k[:1], 1024)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ctl.SetThrottle(c.ctx, 100_000, "test"); err != nil {
		t.Fatal(err)
	}
	return slot, keys
}

// copying waits until e copies slot (some bytes on the target) and returns
// the move's id.
func copying(t *testing.T, e *Executor, slot slots.Slot) string {
	t.Helper()
	var id string
	waitfor.Err(t, time.Minute, "the copy to start", func() error {
		for _, m := range e.InFlight() {
			if m.Slot == slot.Int() && m.Bytes > 0 {
				id = m.MoveID
				return nil
			}
		}
		return fmt.Errorf("slot %d not copying: %+v", slot.Int(), e.InFlight())
	})
	return id
}

func checkMoved(t *testing.T, c *cluster, slot slots.Slot, keys [][]byte, to string) {
	t.Helper()
	snap, _ := c.dir.Snapshot(c.ctx)
	if o := snap.Owner(slot); o != to {
		t.Fatalf("slot %d owned by %s, want %s", slot.Int(), o, to)
	}
	// The reads route by the nodes' watched map (c.get), which may not
	// have seen the commit yet.
	waitfor.True(t, time.Minute, "the watched map at the commit", func() bool {
		m := c.m.snap.Load()
		return m != nil && m.Version >= snap.Version
	})
	for _, k := range keys {
		got, err := c.get(k)
		if err != nil || !bytes.Equal(got, bytes.Repeat(k[:1], 1024)) {
			t.Fatalf("get %q after the move: %d bytes, %v", k, len(got), err)
		}
	}
}

// TestSourceRestartDoesNotPause: a source away for about 1.5 s in the
// middle of a copy is retried from the move's recorded phase, with
// backoff, for MoveRetryFor; the plan does not pause (the old executor
// paused it after 5 tries in under a second).
func TestSourceRestartDoesNotPause(t *testing.T) {
	c := newCluster(t, 2)
	slot, keys := slowSlot(t, c)
	e, _ := c.startExecutor("a")
	p, err := c.ctl.MoveSlot(c.ctx, slot.Int(), "n2", "test", "")
	if err != nil {
		t.Fatal(err)
	}
	copying(t, e, slot)
	src := c.nodes["n1"]
	src.stop()
	// The fault: the source is away this long (a restart), then back at
	// its address with its data.
	time.Sleep(1500 * time.Millisecond)
	c.startNode("n1", src.dir, src.addr)
	done := c.waitPlan(p.ID, StateDone)
	if pr := done.Progress(); pr.Done != 1 || pr.Failed != 0 {
		t.Fatalf("progress %+v, error %q", pr, done.Error)
	}
	checkMoved(t, c, slot, keys, "n2")
}

// TestLostCaptureRestartsCopy: a source that lost the change capture of a
// move (here: ended under it) answers OUT_OF_RANGE; as store.proto says,
// the mover restarts the copy (a new move of the same plan entry) instead
// of failing the move and pausing the plan.
func TestLostCaptureRestartsCopy(t *testing.T) {
	c := newCluster(t, 2)
	slot, keys := slowSlot(t, c)
	e, _ := c.startExecutor("a")
	before, _ := c.dir.Snapshot(c.ctx)
	p, err := c.ctl.MoveSlot(c.ctx, slot.Int(), "n2", "test", "")
	if err != nil {
		t.Fatal(err)
	}
	id := copying(t, e, slot)
	src, err := c.pool.client(c.nodes["n1"].addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.EndCapture(c.ctx, &slotdv1.EndCaptureRequest{Slot: uint32(slot.Int()), MoveId: id}); err != nil {
		t.Fatal(err)
	}
	done := c.waitPlan(p.ID, StateDone)
	if pr := done.Progress(); pr.Done != 1 || pr.Failed != 0 {
		t.Fatalf("progress %+v, error %q", pr, done.Error)
	}
	checkMoved(t, c, slot, keys, "n2")
	hist, err := c.dir.HistorySince(c.ctx, before.Version, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, h := range hist {
		if h.PlanID == p.ID && h.Kind != directory.ChangeMoveAdvance {
			kinds = append(kinds, h.Kind+" "+h.MoveID)
		}
	}
	got := strings.Join(kinds, ", ")
	if !strings.Contains(got, directory.ChangeMoveAbort+" "+id) || !strings.Contains(got, directory.ChangeMoveCommit+" "+id+".r1") {
		t.Fatalf("history of the plan: %s; want the first move aborted and its restart %s.r1 committed", got, id)
	}
}
