package mover

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/node"
)

// TestEarlyExportOfMoveNotBegun: the source is asked to export while the
// move's begin is written. When the begin is refused (here the plan's run
// key went between the plan read and the begin, as a pause does), the
// capture that early export started is ended before the executor's step
// returns (retire), the slot stays its source's with no move in flight,
// and the target was never asked for anything.
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
	if err := e.plans.refresh(c.ctx); err != nil {
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
	if st := dst.ImportStatus(slot, id); st.LastBatchSeq != 0 || st.SnapshotDone {
		t.Fatalf("target imported for a move that never began: %+v", st)
	}
	if _, err := src.Changes(c.ctx, slot, "probe", 0, 0, false); !errors.Is(err, node.ErrCaptureLost) {
		t.Fatalf("the early export's capture survived the refused begin: %v", err)
	}
	e.clean.mu.Lock()
	queued := len(e.clean.queue)
	e.clean.mu.Unlock()
	if queued != 0 {
		t.Fatalf("%d clean-ups queued for a capture already ended", queued)
	}
}

// TestEarlyExportRetiredInOrder: an early export whose move did not begin
// is retired only once the source has answered it, so that its request
// cannot reach the source after the next move of the slot started its
// capture, and replace that capture with its own (the source lets a new
// capture replace the one running). Here the source's handler is held
// before it starts the capture until retire has been called; when retire
// returns, that handler has answered and its capture is gone, and a
// capture started then is left alone.
func TestEarlyExportRetiredInOrder(t *testing.T) {
	c := newCluster(t, 2)
	e := c.newExecutor()
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	n1Slots := snap.SlotsOf("n1")
	slot := n1Slots.Ranges()[0].From
	entered, release := make(chan struct{}), make(chan struct{})
	var answered atomic.Bool
	hold := func(nd string, s uint32, start bool) {
		if nd != "n1" || s != uint32(slot.Int()) {
			return
		}
		if !start {
			answered.Store(true) // its last batch is being sent
			return
		}
		close(entered)
		<-release
	}
	c.onExport.Store(&hold)
	src, _, err := e.endpoints(snap, "n1", "n2")
	if err != nil {
		t.Fatal(err)
	}
	early, stop := startEarlyExport(c.ctx, src.c, &slotdv1.ExportRequest{Slot: uint32(slot.Int()), MoveId: "stale", RateBytesPerSecond: wireRate(e.rate(c.ctx))})
	defer stop()
	<-entered // the request is at the source, its capture not started
	retired := make(chan error, 1)
	go func() { retired <- earlyOf(early).retire(c.ctx, slot) }()
	// The source cannot answer while its handler is held: retire must be
	// found waiting for that answer, not returned.
	waitfor.Err(t, time.Minute, "retire waiting for the source's answer", func() error {
		select {
		case err := <-retired:
			t.Fatalf("retire returned (%v) while the source held the early export's request", err)
		default:
		}
		if !retireWaitsForAnswer() {
			return errors.New("retire is not blocked in RecvMsg yet")
		}
		return nil
	})
	close(release)
	if err := <-retired; err != nil {
		t.Fatalf("retire: %v", err)
	}
	if !answered.Load() {
		t.Fatal("retire returned before the source answered the early export")
	}
	n1 := c.nodes["n1"].srv.Node()
	if _, err := n1.Changes(c.ctx, slot, "probe", 0, 0, false); !errors.Is(err, node.ErrCaptureLost) {
		t.Fatalf("the early export's capture survived retire: %v", err)
	}
	seq, err := n1.StartCapture(c.ctx, slot, "next")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Changes(c.ctx, slot, "next", seq, 0, false); err != nil {
		t.Fatalf("the next move's capture: %v", err)
	}
}

// retireWaitsForAnswer reports whether a goroutine is in retire, blocked
// receiving the early stream's first message.
func retireWaitsForAnswer() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("(*earlyExport).retire")) && bytes.Contains(g, []byte("RecvMsg")) {
			return true
		}
	}
	return false
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
				tr := &slotTransfer{Slot: slot, MoveID: mv.MoveID, Source: early, Target: plainStore{dst.c}, Rate: e.rate(c.ctx), Fresh: true,
					Journal: &moveJournal{e: e, mv: *mv, prog: &MoveProgress{}, fencing: &fencing}}
				if _, err := tr.Run(c.ctx, stepCopy); err != nil {
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
