package mover

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// TestCancelThenRollbackExact is issue 16's must-show: `slotctl cancel`
// followed at once by `slotctl rollback` must reverse every move of the
// plan that committed, and nothing else, at parallelism 1 and 8, 20 times
// in a row under writes. (The old executor built the rollback from a
// progress record written at most every ProgressInterval and left
// committed moves on their targets.)
func TestCancelThenRollbackExact(t *testing.T) {
	for _, par := range []int{1, 8} {
		t.Run(fmt.Sprintf("parallelism=%d", par), func(t *testing.T) { testCancelThenRollbackExact(t, par) })
	}
}

func testCancelThenRollbackExact(t *testing.T, parallelism int) {
	const rounds, planMoves = 20, 200
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
	w := startWriterAt(c, keys, 500)
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
		want := 1 + round%6*parallelism
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
		if _, err := ctl.Cancel(c.ctx, p.ID, "test"); err != nil {
			t.Fatalf("round %d: cancel: %v", round, err)
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
