package mover

import (
	"errors"
	"testing"
)

// TestProposeSkipIfBalanced: with SkipIfBalanced, a plan the planner finds
// nothing to do for is not stored (ErrBalanced), so the automatic
// balancer leaves no empty plan behind when the stores' figures of now
// show the imbalance it saw in the reports gone; without it, the empty
// plan is stored as before, and a plan with moves is stored either way.
func TestProposeSkipIfBalanced(t *testing.T) {
	c := newCluster(t, 3)
	c.startExecutor("m1")
	count := func() int {
		t.Helper()
		ps, err := c.ctl.List(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ps)
	}
	// Slot counts at their targets first.
	first, err := c.ctl.Propose(c.ctx, PlanRequest{Operator: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Moves) > 0 {
		if _, err := c.ctl.Apply(c.ctx, first.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		c.waitPlan(first.ID, StateDone)
	}
	stored := count()

	if _, err := c.ctl.Propose(c.ctx, PlanRequest{Operator: "auto", SkipIfBalanced: true}); !errors.Is(err, ErrBalanced) {
		t.Fatalf("a balanced cluster: Propose = %v, want ErrBalanced", err)
	}
	if n := count(); n != stored {
		t.Fatalf("%d plans stored, want %d: none more", n, stored)
	}
	p, err := c.ctl.Propose(c.ctx, PlanRequest{Operator: "alice"})
	if err != nil || len(p.Moves) != 0 || count() != stored+1 {
		t.Fatalf("without SkipIfBalanced: %v, %v; want an empty plan stored", p, err)
	}
	c.addNode("n4")
	p, err = c.ctl.Propose(c.ctx, PlanRequest{Operator: "auto", SkipIfBalanced: true, MaxMoves: 3})
	if err != nil || len(p.Moves) != 3 || count() != stored+2 {
		t.Fatalf("a new node with SkipIfBalanced: %v, %v; want a plan of 3 moves stored", p, err)
	}
}
