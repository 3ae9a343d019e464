package mover

import (
	"errors"
	"strings"
	"testing"

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
	e, err := NewExecutor(ExecutorConfig{Directory: c.dir, Control: c.ctl, Etcd: c.etcd.Client(), Stores: c.pool, Name: "t", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
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
	// The early export did reach the source: its capture is there (asked
	// for another move's changes, the source names it).
	if _, err := src.Changes(c.ctx, slot, "probe", 0, 0, false); !errors.Is(err, node.ErrMoveMismatch) || !strings.Contains(err.Error(), id) {
		t.Fatalf("no capture of the early export on the source: %v", err)
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
