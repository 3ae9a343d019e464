package mover

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// TestMoveReportsBytesCopied: a move's bytes copied are what its transfer
// applied on the target, stored with the commit (`slotctl move` printed
// "0 B copied": it showed the planner's estimate, and a one-move plan has
// none).
func TestMoveReportsBytesCopied(t *testing.T) {
	c := newCluster(t, 2)
	c.startExecutor("a")
	snap, _ := c.dir.Snapshot(c.ctx)
	mine := snap.SlotsOf("n1")
	slot := mine.Ranges()[0].From
	keys := keysInSlots(map[int]bool{slot.Int(): true}, 20)
	want := int64(0)
	value := []byte(strings.Repeat("v", 1000))
	for _, k := range keys {
		if err := c.put(c.ctx, k, value); err != nil {
			t.Fatal(err)
		}
		want += int64(len(k) + len(value))
	}
	p, err := c.ctl.MoveSlot(c.ctx, slot.Int(), "n2", "test", "")
	if err != nil {
		t.Fatal(err)
	}
	done := c.waitPlan(p.ID, StateDone)
	if got := done.Progress().BytesCopied; got < want {
		t.Fatalf("bytes copied %d, want at least the slot's %d", got, want)
	}
	if done.Moves[0].Copied != done.Progress().BytesCopied || done.Progress().BytesDone != 0 {
		t.Fatalf("move copied %d, plan copied %d, estimate done %d", done.Moves[0].Copied, done.Progress().BytesCopied, done.Progress().BytesDone)
	}
}

// TestSkippedMoveRecorded: a move whose slot is on its target already when
// its turn comes is recorded as skipped, with why, and counted so (it was
// recorded as done, which also inflated the bytes done).
func TestSkippedMoveRecorded(t *testing.T) {
	c := newCluster(t, 2)
	c.addNode("n3")
	p, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n3"}}}, MaxMoves: 2, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctl.Apply(c.ctx, p.ID, "test"); err != nil { // no executor yet
		t.Fatal(err)
	}
	// Someone else moves the second slot onto its target first.
	m := p.Moves[1]
	slot := slots.MustNew(m.Slot)
	mv, err := c.dir.BeginMove(c.ctx, directory.MoveSpec{Slot: slot, From: m.From, To: m.To, By: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.dir.AdvanceMove(c.ctx, slot, mv.MoveID, directory.PhaseFenced); err != nil {
		t.Fatal(err)
	}
	if _, err := c.dir.CommitMove(c.ctx, slot, mv.MoveID, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, _ := c.startExecutorWith("a", func(cfg *ExecutorConfig) { cfg.Registerer = reg })
	done := c.waitPlan(p.ID, StateDone)
	pr := done.Progress()
	if pr.Done != 1 || pr.Skipped != 1 || done.Moves[1].Status != MoveSkipped || !strings.Contains(done.Moves[1].Error, "already") {
		t.Fatalf("progress %+v, second move %s %q; want one done, one skipped saying why", pr, done.Moves[1].Status, done.Moves[1].Error)
	}
	if got := testutil.ToFloat64(e.m.moves.WithLabelValues("skipped")); got != 1 {
		t.Errorf("slotd_mover_moves_total{result=skipped} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.m.moves.WithLabelValues("committed")); got != 1 {
		t.Errorf("slotd_mover_moves_total{result=committed} = %v, want 1", got)
	}
}
