package mover

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

func TestControlRefusesBadInput(t *testing.T) {
	c := newCluster(t, 2)
	before, _ := c.dir.Snapshot(c.ctx)
	cases := []struct {
		name string
		call func() error
		want error
		msg  string
	}{
		{"slot out of range", func() error { _, err := c.ctl.MoveSlot(c.ctx, 99999, "n2", "t", ""); return err }, ErrInvalid, "99999"},
		{"unknown target", func() error { _, err := c.ctl.MoveSlot(c.ctx, 1, "nope", "t", ""); return err }, ErrNotFound, `"nope"`},
		{"drain unknown", func() error {
			_, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Drain: []string{"ghost"}}})
			return err
		}, ErrNotFound, "ghost"},
		{"negative weight", func() error {
			_, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Weights: map[string]int{"n1": -1}}})
			return err
		}, ErrInvalid, "negative"},
		{"apply unknown plan", func() error { _, err := c.ctl.Apply(c.ctx, "p-nope", "t"); return err }, ErrNotFound, "p-nope"},
		{"malformed plan file", func() error {
			_, err := c.ctl.Submit(c.ctx, &Plan{ID: "x", Moves: []PlannedMove{{Slot: 5, From: "n1", To: "n1"}}}, "t")
			return err
		}, ErrInvalid, "to itself"},
		{"duplicate slot in plan file", func() error {
			_, err := c.ctl.Submit(c.ctx, &Plan{ID: "x", Moves: []PlannedMove{{Slot: 5, From: "n1", To: "n2"}, {Slot: 5, From: "n1", To: "n2"}}}, "t")
			return err
		}, ErrInvalid, "twice"},
		{"negative throttle", func() error { return c.ctl.SetThrottle(c.ctx, -5, "t") }, ErrInvalid, "negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
	after, _ := c.dir.Snapshot(c.ctx)
	if after.Version != before.Version {
		t.Fatalf("bad input changed the version %d -> %d", before.Version, after.Version)
	}
}

func TestStalePlanRefused(t *testing.T) {
	c := newCluster(t, 3)
	c.startExecutor("a")
	c.addNode("n4")
	p, err := c.ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n4"}}}, MaxMoves: 5, Operator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// Someone moves the plan's first slot elsewhere meanwhile.
	first := p.Moves[0]
	other := "n1"
	if first.From == "n1" {
		other = "n2"
	}
	mp, err := c.ctl.MoveSlot(c.ctx, first.Slot, other, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	c.waitPlan(mp.ID, StateDone)
	_, err = c.ctl.Apply(c.ctx, p.ID, "test")
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), fmt.Sprintf("slot %d", first.Slot)) {
		t.Fatalf("apply of a stale plan: %v", err)
	}
}

// TestOldPlansPruned: beyond KeepPlans, the oldest plans that are not
// applying or paused are deleted as new ones are stored; the applying plan
// is kept whatever its age.
func TestOldPlansPruned(t *testing.T) {
	c := newCluster(t, 3)
	c.addNode("n4")
	ctl, err := NewControl(ControlConfig{Directory: c.dir, Logger: testLogger(), KeepPlans: 3})
	if err != nil {
		t.Fatal(err)
	}
	propose := func(moves int) *Plan {
		p, err := ctl.Propose(c.ctx, PlanRequest{Edits: Edits{Add: []NodeSpec{{ID: "n4"}}}, MaxMoves: moves, Operator: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := propose(1)
	if _, err := ctl.Apply(c.ctx, first.ID, "test"); err != nil { // no executor: it stays applying
		t.Fatal(err)
	}
	var ids []string
	for m := 2; m <= 14; m++ {
		ids = append(ids, propose(m).ID)
	}
	stored, err := c.dir.PlanIDs(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	plans := len(stored)
	// 3 kept + the margin before pruning (3/10+1) + the applying plan.
	if plans > 3+1+1 {
		t.Fatalf("%d plans stored with KeepPlans 3: %v", plans, stored)
	}
	if p, err := ctl.Get(c.ctx, first.ID); err != nil || p.State != StateApplying {
		t.Fatalf("the applying plan: %v, %v; want it kept", p, err)
	}
	for _, id := range ids[len(ids)-3:] {
		if _, err := ctl.Get(c.ctx, id); err != nil {
			t.Errorf("one of the newest plans, %s: %v", id, err)
		}
	}
	if _, err := ctl.Get(c.ctx, ids[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("the oldest proposal: %v, want ErrNotFound", err)
	}
}

// TestThrottleLiftedWhileDonorIdle: a throttle lifted (0, unlimited) while
// no move runs reaches a donor with its next export. SetThrottle tells only
// the donors with a move in flight, and an export's rate 0 means "leave the
// node's rate as it is": a donor that last exported under a limit kept it
// for good.
func TestThrottleLiftedWhileDonorIdle(t *testing.T) {
	c := newCluster(t, 2)
	e, _ := c.startExecutor("a")
	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var on1 []int
	for s := 0; s < 100 && len(on1) < 2; s++ {
		if snap.Owner(slots.MustNew(s)) == "n1" {
			on1 = append(on1, s)
		}
	}
	donor := c.nodes["n1"].srv.Node()
	for i, tc := range []struct {
		throttle int64
		want     int64
	}{
		{throttle: 1 << 30, want: 1 << 30},
		{throttle: 0, want: 0},
	} {
		if err := c.ctl.SetThrottle(c.ctx, tc.throttle, "test"); err != nil {
			t.Fatal(err)
		}
		// The executor learns the throttle from its watch; the move must
		// start after that, as an operator's next plan does.
		waitfor.Err(t, 30*time.Second, "the executor to see the throttle", func() error {
			if got := e.throttle.Load(); got != tc.throttle {
				return fmt.Errorf("executor throttle %d", got)
			}
			return nil
		})
		p, err := c.ctl.MoveSlot(c.ctx, on1[i], "n2", "test", "")
		if err != nil {
			t.Fatal(err)
		}
		c.waitPlan(p.ID, StateDone)
		if got := donor.ExportRate(); got != tc.want {
			t.Fatalf("throttle %d, then a move from n1: n1 exports at %d B/s, want %d", tc.throttle, got, tc.want)
		}
	}
}
