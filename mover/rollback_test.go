package mover

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// TestCancelThenRollbackExact: `slotctl cancel` followed at once by
// `slotctl rollback` must reverse every move of the plan that committed,
// and nothing else, at parallelism 1 and 8, 20 times in a row under
// writes. (The old executor built the rollback from a
// progress record written at most every ProgressInterval and left
// committed moves on their targets.)
func TestCancelThenRollbackExact(t *testing.T) {
	for _, par := range []int{1, 8, 0} {
		t.Run(parName(par), func(t *testing.T) { testCancelThenRollbackExact(t, par) })
	}
}

func testCancelThenRollbackExact(t *testing.T, parallelism int) {
	const rounds, planMoves = 20, 60
	c := newCluster(t, 3)
	c.startExecutorWith("a", func(cfg *ExecutorConfig) { cfg.Parallelism = parallelism })
	c.addNode("n4")
	// Plans without slot sizes: asking every store for them each round
	// only slows the test down.
	ctl, err := NewControl(ControlConfig{Directory: c.dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	first, err := ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n4"}}}, MaxMoves: planMoves, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// Writes go to the first 16 slots the plans move (each round plans
	// from the same owners, so it moves the same slots).
	moving := map[int]bool{}
	for _, m := range first.Moves[:16] {
		moving[m.Slot] = true
	}
	keys := keysInSlots(moving, 4)
	for _, k := range keys {
		if err := c.put(c.ctx, k, []byte("initial")); err != nil {
			t.Fatal(err)
		}
	}
	w := startWriterAt(c, keys, 200)
	for round := range rounds {
		before, err := c.dir.Snapshot(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n4"}}}, MaxMoves: planMoves, Operator: "test"})
		if err != nil {
			t.Fatal(err)
		}
		// Cancel once a few of its moves committed (more each round), from
		// the table watch, so that moves are in flight when it lands.
		want := 1 + round%5*max(1, parallelism/2)
		reached := make(chan struct{})
		var once sync.Once
		stop := c.watchTable(before.Version, func(_ context.Context, s *directory.Snapshot) {
			if s.Counts()["n4"]-before.Counts()["n4"] >= want {
				once.Do(func() { close(reached) })
			}
		})
		if _, err := ctl.Apply(c.ctx, p.ID, "test"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reached:
		case <-time.After(2 * time.Minute): // a hang, not a timing claim
			t.Fatalf("round %d: %d moves never committed", round, want)
		}
		stop()
		// The cancel races the plan's last moves: a plan that finished
		// first is rolled back as a finished plan, which must be as exact.
		if _, err := ctl.Cancel(c.ctx, p.ID, "test"); err != nil {
			if got, gerr := ctl.Get(c.ctx, p.ID); !errors.Is(err, ErrPrecondition) || gerr != nil || got.State != StateDone {
				t.Fatalf("round %d: cancel: %v", round, err)
			}
			t.Logf("round %d: the plan finished before the cancel landed", round)
		}
		rb, err := ctl.Rollback(c.ctx, p.ID, "test", "")
		if err != nil {
			t.Fatalf("round %d: rollback: %v", round, err)
		}
		c.waitPlan(rb.ID, StateDone)
		after, err := c.dir.Snapshot(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for s := range slots.Count {
			sl := slots.MustNew(s)
			if before.Owner(sl) != after.Owner(sl) {
				t.Fatalf("round %d: slot %d owned by %s before, %s after its rollback", round, s, before.Owner(sl), after.Owner(sl))
			}
		}
		// The plan's done moves are exactly its commits in history, and
		// the rollback reversed exactly those.
		hist, err := c.dir.HistorySince(c.ctx, before.Version, 0)
		if err != nil {
			t.Fatal(err)
		}
		commits := 0
		for _, h := range hist {
			if h.Kind == directory.ChangeMoveCommit && h.PlanID == p.ID {
				commits++
			}
		}
		got, err := ctl.Get(c.ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if done := got.Progress().Done; done != commits || len(rb.Moves) != commits {
			t.Fatalf("round %d: plan shows %d done, history %d commits, rollback reversed %d", round, done, commits, len(rb.Moves))
		}
		t.Logf("round %d: cancelled after %d commits (asked %d), rolled back exactly", round, commits, want)
	}
	w.finish(t)
	checkAcked(t, c, w)
}

func TestRollbackRestoresOwners(t *testing.T) {
	c := newCluster(t, 3)
	c.startExecutor("a")
	c.addNode("n4")
	before, _ := c.dir.Snapshot(c.ctx)
	p, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n4"}}}, MaxMoves: 10, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	moving := map[int]bool{}
	for _, m := range p.Moves {
		moving[m.Slot] = true
	}
	keys := keysInSlots(moving, 4)
	for _, k := range keys {
		if err := c.put(c.ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ctl.Apply(c.ctx, p.ID, "test"); err != nil {
		t.Fatal(err)
	}
	c.waitPlan(p.ID, StateDone)
	if _, err := c.ctl.Rollback(c.ctx, p.ID, "test", ""); err != nil {
		t.Fatal(err)
	}
	c.waitPlan("rb-"+p.ID, StateDone)
	after, _ := c.dir.Snapshot(c.ctx)
	for s := range slots.Count {
		sl := slots.MustNew(s)
		if before.Owner(sl) != after.Owner(sl) {
			t.Fatalf("slot %d: owner %s before, %s after rollback", s, before.Owner(sl), after.Owner(sl))
		}
	}
	if after.Version <= before.Version {
		t.Fatalf("rollback did not advance the version: %d -> %d", before.Version, after.Version)
	}
	for _, k := range keys {
		if v, err := c.get(k); err != nil || string(v) != "x" {
			t.Fatalf("%q = %q, %v after rollback", k, v, err)
		}
	}
	old, _ := c.ctl.Get(c.ctx, p.ID)
	if old.State != StateRolledBack || old.RolledBackBy != "rb-"+p.ID {
		t.Fatalf("old plan %s rolled back by %q", old.State, old.RolledBackBy)
	}
	if _, err := c.ctl.Rollback(c.ctx, p.ID, "test", ""); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("second rollback: %v, want ErrPrecondition", err)
	}
}

// TestRollbackOfDrain rolls back a plan that drained a node: the node is
// active again and gets its slots back.
func TestRollbackOfDrain(t *testing.T) {
	c := newCluster(t, 3)
	c.startExecutor("a")
	before, _ := c.dir.Snapshot(c.ctx)
	p, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Drain: []string{"n3"}}, MaxMoves: 6, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctl.Apply(c.ctx, p.ID, "test"); err != nil {
		t.Fatal(err)
	}
	c.waitPlan(p.ID, StateDone)
	if _, err := c.ctl.Rollback(c.ctx, p.ID, "test", ""); err != nil {
		t.Fatal(err)
	}
	c.waitPlan("rb-"+p.ID, StateDone)
	after, _ := c.dir.Snapshot(c.ctx)
	if n, _ := after.Node("n3"); n.State != directory.NodeActive {
		t.Fatalf("n3 is %s after the rollback of its drain", n.State)
	}
	if after.Counts()["n3"] != before.Counts()["n3"] {
		t.Fatalf("n3 owns %d slots, had %d", after.Counts()["n3"], before.Counts()["n3"])
	}
}
