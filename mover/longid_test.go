package mover

import (
	"strings"
	"testing"

	"github.com/slotd/slotd/slots"
)

// TestLongNodeIDs runs node ids of 64 characters (the longest the directory
// accepts) through every operator path: plan, apply, move, rollback,
// rollback of a rollback, drain, cancel. Plan ids once grew with the node
// id (`m-<version>-<slot>-<id>`, `rb-<id>`) past the 64-byte limit, and a
// plan whose records could not be written stayed applying for good.
func TestLongNodeIDs(t *testing.T) {
	c := newCluster(t, 3)
	c.startExecutor("a")
	a := strings.Repeat("a", 60) + "-n04"
	b := strings.Repeat("b", 60) + "-n05"
	c.addNode(a)
	c.addNode(b)
	checkID := func(p *Plan) {
		t.Helper()
		if len(p.ID) > maxPlanID {
			t.Fatalf("plan id %q is %d bytes", p.ID, len(p.ID))
		}
	}
	p, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: a}}}, MaxMoves: 4, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	checkID(p)
	if _, err := c.ctl.Apply(c.ctx, p.ID, "test"); err != nil {
		t.Fatal(err)
	}
	c.waitPlan(p.ID, StateDone)

	before, _ := c.dir.Snapshot(c.ctx)
	slot := 0
	for before.Owner(slots.MustNew(slot)) != "n1" {
		slot++
	}
	mv, err := c.ctl.MoveSlot(c.ctx, slot, b, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	checkID(mv)
	c.waitPlan(mv.ID, StateDone)
	rb, err := c.ctl.Rollback(c.ctx, mv.ID, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	checkID(rb)
	c.waitPlan(rb.ID, StateDone)
	rbrb, err := c.ctl.Rollback(c.ctx, rb.ID, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	checkID(rbrb)
	c.waitPlan(rbrb.ID, StateDone)
	if snap, _ := c.dir.Snapshot(c.ctx); snap.Owner(slots.MustNew(slot)) != b {
		t.Fatalf("slot %d on %s after a rollback of its rollback, want %s", slot, snap.Owner(slots.MustNew(slot)), b)
	}

	drain, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Drain: []string{a}}, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	checkID(drain)
	if _, err := c.ctl.Apply(c.ctx, drain.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctl.Cancel(c.ctx, drain.ID, "test"); err != nil {
		t.Fatal(err)
	}
	back, err := c.ctl.Rollback(c.ctx, drain.ID, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	checkID(back)
	c.waitPlan(back.ID, StateDone)
	after, _ := c.dir.Snapshot(c.ctx)
	if n, _ := after.Node(a); n.Draining {
		t.Fatalf("%s still draining after the drain's rollback", a)
	}
	if got, want := after.Counts()[a], before.Counts()[a]; got != want {
		t.Fatalf("%s owns %d slots after the drain's rollback, %d before", a, got, want)
	}
	if len(after.Moves) != 0 {
		t.Fatalf("%d moves in flight at the end", len(after.Moves))
	}
}
