package mover

import (
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

// TestPlansIdle: `slotctl move` skips the read of the plan keys only when
// the control knows every plan record through some revision (a read after
// the leader's plan watch began, then the watch) and none is applying or
// paused; the transaction then refuses any plan written after that
// revision.
func TestPlansIdle(t *testing.T) {
	rec := func(t *testing.T, id string, st PlanState, rev int64) directory.PlanEvent {
		data, err := encodePlan(&Plan{ID: id, State: st})
		if err != nil {
			t.Fatal(err)
		}
		return directory.PlanEvent{ID: id, Record: &directory.PlanRecord{Data: data, Rev: rev}}
	}
	for _, tc := range []struct {
		name string
		// events are what the control learns, in order: a read of every
		// plan key at readAt (>0, states as the read found them) or a
		// watch event.
		run         func(t *testing.T, c *Control)
		wantOK      bool
		wantThrough int64
	}{
		{name: "no watch", run: func(t *testing.T, c *Control) {
			c.decodedMu.Lock()
			c.readAt(10, nil)
			c.decodedMu.Unlock()
		}},
		{name: "watch, no read since it began", run: func(t *testing.T, c *Control) {
			c.decodedMu.Lock()
			c.readAt(10, nil)
			c.decodedMu.Unlock()
			c.learnRecord(directory.PlanEvent{Start: true, Through: 12})
		}},
		{name: "read after the watch began", run: func(t *testing.T, c *Control) {
			c.learnRecord(directory.PlanEvent{Start: true, Through: 12})
			c.decodedMu.Lock()
			c.readAt(15, nil)
			c.decodedMu.Unlock()
		}, wantOK: true, wantThrough: 15},
		{name: "and plans done since, seen by the watch", run: func(t *testing.T, c *Control) {
			c.learnRecord(directory.PlanEvent{Start: true, Through: 12})
			c.decodedMu.Lock()
			c.readAt(15, nil)
			c.decodedMu.Unlock()
			c.learnRecord(rec(t, "a", StateApplying, 16))
			ev := rec(t, "a", StateDone, 20)
			ev.Through = 21
			c.learnRecord(ev)
		}, wantOK: true, wantThrough: 21},
		{name: "a plan applying", run: func(t *testing.T, c *Control) {
			c.learnRecord(directory.PlanEvent{Start: true, Through: 12})
			c.decodedMu.Lock()
			c.readAt(15, nil)
			c.decodedMu.Unlock()
			ev := rec(t, "a", StateApplying, 16)
			ev.Through = 16
			c.learnRecord(ev)
		}},
		{name: "a plan paused", run: func(t *testing.T, c *Control) {
			c.learnRecord(directory.PlanEvent{Start: true, Through: 12})
			ev := rec(t, "a", StatePaused, 13)
			ev.Through = 13
			c.learnRecord(ev)
			c.decodedMu.Lock()
			c.readAt(15, map[string]int64{"a": 13})
			c.decodedMu.Unlock()
		}},
		{name: "a paused plan deleted", run: func(t *testing.T, c *Control) {
			c.learnRecord(directory.PlanEvent{Start: true, Through: 12})
			c.learnRecord(rec(t, "a", StatePaused, 13))
			c.decodedMu.Lock()
			c.readAt(15, map[string]int64{"a": 13})
			c.decodedMu.Unlock()
			c.learnRecord(directory.PlanEvent{ID: "a", Through: 17})
		}, wantOK: true, wantThrough: 17},
		{name: "a new watch", run: func(t *testing.T, c *Control) {
			c.learnRecord(directory.PlanEvent{Start: true, Through: 12})
			c.decodedMu.Lock()
			c.readAt(15, nil)
			c.decodedMu.Unlock()
			c.planWatchEnded()
			c.learnRecord(directory.PlanEvent{Start: true, Through: 30})
		}},
		{name: "an unreadable record", run: func(t *testing.T, c *Control) {
			c.learnRecord(directory.PlanEvent{Start: true, Through: 12})
			c.decodedMu.Lock()
			c.readAt(15, nil)
			c.decodedMu.Unlock()
			c.learnRecord(directory.PlanEvent{ID: "x", Record: &directory.PlanRecord{Data: []byte("not a plan"), Rev: 16}, Through: 16})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Control{keep: defaultKeepPlans, lg: testLogger()}
			tc.run(t, c)
			through, ok := c.plansIdle()
			if ok != tc.wantOK || through != tc.wantThrough {
				t.Fatalf("plansIdle = %d, %v; want %d, %v", through, ok, tc.wantThrough, tc.wantOK)
			}
		})
	}
}

// TestMoveSlotByLeader: on the leader's process, `slotctl move` returns
// with the move begun (the plan and the begin are one transaction), and
// the leader drives that move to the end.
func TestMoveSlotByLeader(t *testing.T) {
	c := newCluster(t, 2)
	e, _ := c.startExecutor("leader")
	waitfor.True(t, time.Minute, "a leader with a table and its plan watch", func() bool {
		c.ctl.decodedMu.Lock()
		watching := c.ctl.known.watchFrom > 0
		c.ctl.decodedMu.Unlock()
		return watching && e.isLeader() && e.latest.Load() != nil
	})
	move := func(slot int, to string) (*Plan, *directory.Snapshot) {
		t.Helper()
		p, err := c.ctl.MoveSlot(c.ctx, slot, to, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		after, err := c.dir.Snapshot(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p, after
	}
	snap, _ := c.dir.Snapshot(c.ctx)
	n1 := snap.SlotsOf("n1")
	var todo []int
	for s := range n1.All() {
		if todo = append(todo, s.Int()); len(todo) == 4 {
			break
		}
	}
	// The first `slotctl move` of the term reads the plan keys (the watch
	// began after anything this control knew).
	p, _ := move(todo[0], "n2")
	c.waitPlan(p.ID, StateDone)
	waitfor.True(t, time.Minute, "the watch to show the plan done", func() bool { _, ok := c.ctl.plansIdle(); return ok })
	for i, s := range todo[1:] {
		p, after := move(s, "n2")
		mv, moving := after.Move(slots.MustNew(s))
		if owner := after.Owner(slots.MustNew(s)); !(moving && mv.PlanID == p.ID) && owner != "n2" {
			t.Fatalf("move %d: when MoveSlot returned, slot %d was on %s with no move of plan %s in flight", i, s, owner, p.ID)
		}
		c.waitPlan(p.ID, StateDone)
	}
}
