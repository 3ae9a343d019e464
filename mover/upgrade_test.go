package mover

import (
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
)

// TestUpgradeProgressToResults: schema 1 kept a plan's results in a
// "<id>.progress" record written now and then; the upgrade turns them into
// directory results, gives an applying plan its run key, and deletes the
// progress records. Run twice, it changes nothing more.
func TestUpgradeProgressToResults(t *testing.T) {
	c := newCluster(t, 2)
	now := time.Now().UTC()
	p := &Plan{ID: "p-1-abc", State: StateApplying, Created: now, Moves: []PlannedMove{
		{Slot: 1, From: "n1", To: "n2", Status: MovePending},
		{Slot: 2, From: "n1", To: "n2", Status: MovePending},
		{Slot: 3, From: "n1", To: "n2", Status: MovePending},
		{Slot: 4, From: "n1", To: "n2", Status: MovePending},
	}}
	done := &Plan{ID: "p-0-def", State: StateDone, Created: now.Add(-time.Hour), Moves: []PlannedMove{
		{Slot: 5, From: "n1", To: "n2", Status: MoveDone, MoveID: "p-0-def.0", Finished: now},
	}}
	for _, q := range []*Plan{p, done} {
		b, err := encodePlan(q)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.dir.PutPlan(c.ctx, q.ID, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.dir.PutPlan(c.ctx, p.ID+".progress", []byte(`{"status":"dspa","errors":{"2":"boom"}}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := UpgradeResults(c.ctx, c.dir); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := c.dir.PlanIDs(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("plan records after the upgrade: %v, want the two plans alone", ids)
	}
	got, err := c.ctl.Get(c.ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []MoveStatus{MoveDone, MoveSkipped, MoveFailed, MoveAborted}
	for i, m := range got.Moves {
		if m.Status != want[i] {
			t.Errorf("move %d: %s, want %s", i, m.Status, want[i])
		}
	}
	if got.Moves[2].Error != "boom" {
		t.Errorf("move 2 error %q", got.Moves[2].Error)
	}
	if run, err := c.dir.Running(c.ctx, p.ID); err != nil || !run {
		t.Errorf("applying plan's run key: %v, %v", run, err)
	}
	if run, err := c.dir.Running(c.ctx, done.ID); err != nil || run {
		t.Errorf("done plan's run key: %v, %v", run, err)
	}
	res, err := c.dir.PlanResults(c.ctx, done.ID)
	if err != nil || res[0].Status != directory.ResultDone {
		t.Errorf("done plan's results: %v, %v", res, err)
	}
}
