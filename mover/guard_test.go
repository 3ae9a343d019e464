package mover

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

func TestPauseResumeCancel(t *testing.T) {
	for _, par := range []int{1, 8, 0} {
		t.Run(parName(par), func(t *testing.T) { testPauseResumeCancel(t, par) })
	}
}

func testPauseResumeCancel(t *testing.T, parallelism int) {
	c := newCluster(t, 3)
	c.startExecutorWith("a", func(cfg *ExecutorConfig) { cfg.Parallelism = parallelism })
	c.addNode("n4")
	p, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n4"}}}, MaxMoves: 400, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// Every Export is held until the pause is recorded, so no move can
	// finish before it: the pause lands with moves in flight and most of
	// the plan still to do, whatever the machine's speed. The pause deletes
	// the plan's run key, which every begin compares, so nothing begins
	// after it either.
	release := make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	defer unhold()
	hold := func(_ string, _ uint32, start bool) {
		if start {
			select {
			case <-release:
			case <-c.ctx.Done():
			}
		}
	}
	c.onExport.Store(&hold)
	if _, err := c.ctl.Apply(c.ctx, p.ID, "test"); err != nil {
		t.Fatal(err)
	}
	waitMoveInFlight(c, "a move in flight")
	if _, err := c.ctl.Pause(c.ctx, p.ID, false, "test"); err != nil {
		t.Fatal(err)
	}
	unhold()
	// Paused: the moves in flight finish and nothing else starts.
	var owned int
	waitfor.Err(c.t, 30*time.Second, "pause settles", func() error {
		snap, err := c.dir.Snapshot(c.ctx)
		if err != nil {
			return err
		}
		if len(snap.Moves) != 0 {
			return errors.New("move in flight")
		}
		owned = snap.Counts()["n4"]
		return nil
	})
	if _, err := c.ctl.Apply(c.ctx, p.ID, "test"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("apply of a paused plan: %v, want ErrPrecondition", err)
	}
	if owned >= len(p.Moves) {
		t.Fatalf("n4 owns %d slots after a pause that landed before any move finished, want fewer than the plan's %d", owned, len(p.Moves))
	}
	t.Logf("paused with %d of the plan's %d moves done", owned, len(p.Moves))
	if _, err := c.ctl.Resume(c.ctx, p.ID, "test"); err != nil {
		t.Fatal(err)
	}
	waitfor.Err(c.t, 30*time.Second, "moves after resume", func() error {
		snap, _ := c.dir.Snapshot(c.ctx)
		if snap.Counts()["n4"] <= owned {
			return errors.New("no progress")
		}
		return nil
	})
	if _, err := c.ctl.Cancel(c.ctx, p.ID, "test"); err != nil {
		t.Fatal(err)
	}
	waitfor.Err(c.t, 30*time.Second, "cancel settles", func() error {
		snap, err := c.dir.Snapshot(c.ctx)
		if err != nil {
			return err
		}
		if len(snap.Moves) != 0 {
			return errors.New("move in flight")
		}
		return nil
	})
	final, _ := c.ctl.Get(c.ctx, p.ID)
	if final.State != StateCancelled {
		t.Fatalf("state %s", final.State)
	}
	if _, err := c.ctl.Resume(c.ctx, p.ID, "test"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("resume of a cancelled plan: %v", err)
	}
}

// TestPauseAbortsParallelWave pauses a plan with abort while a wave of
// throttled moves is copying: every move of the wave either aborts (its
// slot stays with the source) or, if it was already fencing, commits; none
// is left in flight, and no acknowledged write is lost.
func TestPauseAbortsParallelWave(t *testing.T) {
	c := newCluster(t, 3)
	c.startExecutorWith("a", func(cfg *ExecutorConfig) { cfg.Parallelism = 4; cfg.Verify = false })
	c.addNode("n4")
	p, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n4"}}}, MaxMoves: 8, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	moving := map[int]bool{}
	for _, m := range p.Moves {
		moving[m.Slot] = true
	}
	keys := keysInSlots(moving, 64)
	value := bytes.Repeat([]byte("x"), 1024)
	for _, k := range keys {
		if err := c.put(c.ctx, k, value); err != nil {
			t.Fatal(err)
		}
	}
	// 64 KiB of data per slot at 16 KB/s per donor: each move copies for
	// seconds, so the pause lands while the wave is copying.
	if err := c.ctl.SetThrottle(c.ctx, 16_000, "test"); err != nil {
		t.Fatal(err)
	}
	before, _ := c.dir.Snapshot(c.ctx)
	if _, err := c.ctl.Apply(c.ctx, p.ID, "test"); err != nil {
		t.Fatal(err)
	}
	waitMoveInFlight(c, "the wave to start")
	if _, err := c.ctl.Pause(c.ctx, p.ID, true, "test"); err != nil {
		t.Fatal(err)
	}
	var after *directory.Snapshot
	waitfor.Err(c.t, 60*time.Second, "the wave to settle", func() error {
		snap, err := c.dir.Snapshot(c.ctx)
		if err != nil {
			return err
		}
		if len(snap.Moves) != 0 {
			return fmt.Errorf("%d moves in flight", len(snap.Moves))
		}
		after = snap
		return nil
	})
	if err := c.ctl.SetThrottle(c.ctx, 0, "test"); err != nil {
		t.Fatal(err)
	}
	hist, err := c.dir.HistorySince(c.ctx, before.Version, 0)
	if err != nil {
		t.Fatal(err)
	}
	aborted := 0
	for _, h := range hist {
		if h.Kind == directory.ChangeMoveAbort {
			aborted++
		}
	}
	if aborted == 0 {
		t.Fatalf("no move aborted by the pause (history %+v)", hist)
	}
	for s := range moving {
		if o := after.Owner(slots.MustNew(s)); o != "n4" && o != before.Owner(slots.MustNew(s)) {
			t.Fatalf("slot %d owned by %s, neither source nor target", s, o)
		}
	}
	for _, k := range keys {
		got, err := c.get(k)
		if err != nil {
			t.Fatalf("get %q: %v", k, err)
		}
		if !bytes.Equal(got, value) {
			t.Fatalf("%q lost its value after the aborted wave", k)
		}
	}
	final, _ := c.ctl.Get(c.ctx, p.ID)
	if final.State != StatePaused {
		t.Fatalf("plan %s after pause, want paused", final.State)
	}
	t.Logf("%d of the wave's moves aborted by the pause", aborted)
}

// waitMoveInFlight waits until the directory records a move in flight.
func waitMoveInFlight(c *cluster, what string) {
	c.t.Helper()
	waitfor.Err(c.t, 30*time.Second, what, func() error {
		snap, err := c.dir.Snapshot(c.ctx)
		if err != nil {
			return err
		}
		if len(snap.Moves) == 0 {
			return errors.New("no move in flight")
		}
		return nil
	})
}
