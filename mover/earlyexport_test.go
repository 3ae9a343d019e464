package mover

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client/node"
	"github.com/slotd/slotd/directory"
)

// TestEarlyExportOfMoveNotBegun: the source is asked to export while the
// move's begin is written. When the begin is refused (here the plan's run
// key went between the plan read and the begin, as a pause does), the
// capture that early export started is ended by the executor's clean-up,
// the slot stays its source's with no move in flight, and the target was
// never asked for anything.
func TestEarlyExportOfMoveNotBegun(t *testing.T) {
	c := newCluster(t, 2)
	e := c.newExecutor()
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	n1 := snap.SlotsOf("n1")
	slot := n1.Ranges()[0].From
	p, err := c.ctl.MoveSlot(c.ctx, slot.Int(), "n2", "test", "early export")
	if err != nil {
		t.Fatal(err)
	}
	// The executor holds the plan as applying...
	if err := e.refreshPlans(c.ctx); err != nil {
		t.Fatal(err)
	}
	// ...when its run key goes, the record unchanged (nothing notifies it).
	if err := c.dir.UpdatePlanRun(c.ctx, p.ID, func(old []byte) ([]byte, directory.Run, error) { return old, directory.RunStop, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.step(c.ctx); err != nil {
		t.Fatal(err)
	}
	after, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, moving := after.Move(slot); moving || after.Owner(slot) != "n1" {
		t.Fatalf("slot %d: owner %s, in flight %v; want n1's, not moving", slot.Int(), after.Owner(slot), moving)
	}
	src, dst := c.nodes["n1"].srv.Node(), c.nodes["n2"].srv.Node()
	id := moveID(p.ID, 0)
	// The early export reached the source (its capture is there: asked
	// for another move's changes, the source names it), unless the failed
	// begin stopped it before its request got there (then no capture).
	switch _, err := src.Changes(c.ctx, slot, "probe", 0, 0, false); {
	case errors.Is(err, node.ErrCaptureLost):
		t.Log("the early export was stopped before it reached the source")
	case !errors.Is(err, node.ErrMoveMismatch) || !strings.Contains(err.Error(), id):
		t.Fatalf("the source holds another capture of the slot: %v", err)
	}
	if st := dst.ImportStatus(slot, id); st.LastBatchSeq != 0 || st.SnapshotDone {
		t.Fatalf("target imported for a move that never began: %+v", st)
	}
	// The clean-ups run, as the executor's clean-up loop would.
	e.clean.mu.Lock()
	todo := e.clean.queue
	e.clean.queue = nil
	e.clean.mu.Unlock()
	if len(todo) == 0 {
		t.Fatal("no clean-up queued for the capture")
	}
	for _, cl := range todo {
		if err := e.clean.run(c.ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.Changes(c.ctx, slot, "probe", 0, 0, false); !errors.Is(err, node.ErrCaptureLost) {
		t.Fatalf("the early export's capture survived its clean-up: %v", err)
	}
}

// plainStore hides a pool client's connection: a transfer to it copies
// decoded batches, not through the relay.
type plainStore struct{ slotdv1.StoreClient }

// TestEarlyExportTaken: the stream the source opened while the begin was
// written is the one the copy reads, relayed or decoded: the source serves
// one Export per move, and the slot arrives whole.
func TestEarlyExportTaken(t *testing.T) {
	for _, relayed := range []bool{true, false} {
		t.Run(fmt.Sprintf("relayed=%v", relayed), func(t *testing.T) {
			c := newCluster(t, 2)
			e := c.newExecutor()
			var exports atomic.Int64
			count := func(node string, _ uint32, start bool) {
				if node == "n1" && start {
					exports.Add(1)
				}
			}
			c.onExport.Store(&count)
			snap, _ := c.dir.Snapshot(c.ctx)
			n1 := snap.SlotsOf("n1")
			slot := n1.Ranges()[0].From
			keys := keysInSlots(map[int]bool{slot.Int(): true}, 50)
			for _, k := range keys {
				if err := c.put(c.ctx, k, bytes.Repeat(k[:1], 1024)); err != nil {
					t.Fatal(err)
				}
			}
			if relayed {
				p, err := c.ctl.MoveSlot(c.ctx, slot.Int(), "n2", "test", "early export")
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; ; i++ {
					if _, err := e.step(c.ctx); err != nil {
						t.Fatal(err)
					}
					if got, _ := c.ctl.Get(c.ctx, p.ID); got != nil && got.State == StateDone {
						break
					}
					if i == 10 {
						t.Fatal("plan not done after 10 steps")
					}
				}
			} else {
				src, dst, err := e.endpoints(snap, "n1", "n2")
				if err != nil {
					t.Fatal(err)
				}
				early, stop := startEarlyExport(c.ctx, src.c, &slotdv1.ExportRequest{Slot: uint32(slot.Int()), MoveId: "early", RateBytesPerSecond: wireRate(e.rate(c.ctx))})
				defer stop()
				mv, err := c.dir.BeginMove(c.ctx, directory.MoveSpec{Slot: slot, From: "n1", To: "n2", MoveID: "early", By: "test"})
				if err != nil {
					t.Fatal(err)
				}
				var fencing atomic.Bool
				tr := &Transfer{Slot: slot, MoveID: mv.MoveID, Source: early, Target: plainStore{dst.c}, Rate: e.rate(c.ctx), Fresh: true,
					Journal: &journal{e: e, mv: *mv, prog: &MoveProgress{}, fencing: &fencing}}
				if _, err := tr.Run(c.ctx, StepCopy); err != nil {
					t.Fatal(err)
				}
			}
			if n := exports.Load(); n != 1 {
				t.Errorf("the source served %d Export streams for one move, want 1 (the early one)", n)
			}
			checkMoved(t, c, slot, keys, "n2")
		})
	}
}
