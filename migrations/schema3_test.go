package migrations_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/migrations"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/slots"
)

// TestSchema3KeepsEverySlotAtRF1: a schema-2 directory holding plan
// history, moves (done and in flight), node changes, a throttle and move
// results migrates to schema 3 by writing the replication policy (rf 1,
// min_isr 1) and the schema, and nothing else: every owner, the version
// and the history stay as they were, every slot's set is its owner alone,
// and the move in flight finishes afterwards.
func TestSchema3KeepsEverySlotAtRF1(t *testing.T) {
	c, d2 := schemaDir(t, 2)
	var nodes []directory.Node
	for _, id := range []string{"n1", "n2", "n3"} {
		nodes = append(nodes, directory.Node{ID: id, Addr: "127.0.0.1:7000", Weight: 1})
	}
	_, err := d2.Bootstrap(testCtx(t), nodes, 0, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d2.RegisterNode(testCtx(t), directory.Node{ID: "n4", Addr: "127.0.0.1:7004", Zone: "z4", Weight: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Drain(testCtx(t), "n3", "retire", "t"); err != nil {
		t.Fatal(err)
	}
	// A plan and its history: moves committed, one result recorded.
	ctl, err := mover.NewControl(mover.ControlConfig{Directory: d2})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := ctl.Propose(testCtx(t), mover.PlanRequest{MaxMoves: 4, Operator: "t", Reason: "fill n4"})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range plan.Moves[:3] {
		s := slots.MustNew(m.Slot)
		mv, err := d2.BeginMove(testCtx(t), directory.MoveSpec{Slot: s, From: m.From, To: m.To, Reason: m.Reason})
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			break // stays in flight across the upgrade
		}
		if _, err := d2.AdvanceMove(testCtx(t), s, mv.MoveID, directory.PhaseFenced); err != nil {
			t.Fatal(err)
		}
		if _, err := d2.CommitMove(testCtx(t), s, mv.MoveID, "t"); err != nil {
			t.Fatal(err)
		}
	}
	if err := d2.RecordResult(testCtx(t), plan.ID, directory.MoveResult{Index: 3, Slot: plan.Moves[3].Slot, Status: directory.ResultSkipped}); err != nil {
		t.Fatal(err)
	}
	if err := d2.SetThrottle(testCtx(t), 1<<20); err != nil {
		t.Fatal(err)
	}
	before, err := d2.Snapshot(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	histBefore, err := d2.History(testCtx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	rawBefore := readAll(t, c.Client())

	d3, err := directory.New(directory.Config{Client: c.Client()})
	if err != nil {
		t.Fatal(err)
	}
	applied, err := migrations.Apply(testCtx(t), d3)
	if err != nil || !slices.Equal(applied, []int{3}) {
		t.Fatalf("upgrade = %v, %v; want [3]", applied, err)
	}
	rawAfter := readAll(t, c.Client())
	var changed []string
	for _, k := range slices.Sorted(maps.Keys(rawAfter)) {
		if !bytes.Equal(rawBefore[k], rawAfter[k]) {
			changed = append(changed, k)
		}
	}
	for k := range rawBefore {
		if _, ok := rawAfter[k]; !ok {
			changed = append(changed, k+" (deleted)")
		}
	}
	if want := []string{"/slotd/replication", "/slotd/schema"}; !slices.Equal(changed, want) {
		t.Fatalf("keys the migration wrote: %v, want %v", changed, want)
	}
	var pol directory.Replication
	if err := json.Unmarshal(rawAfter["/slotd/replication"], &pol); err != nil || pol != directory.DefaultReplication() {
		t.Fatalf("stored policy %s (%v), want rf 1 min_isr 1", rawAfter["/slotd/replication"], err)
	}

	after, err := d3.Snapshot(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version {
		t.Errorf("version %d -> %d, want unchanged", before.Version, after.Version)
	}
	if !slices.Equal(after.Owners(), before.Owners()) {
		t.Error("the migration changed slot owners")
	}
	if !slices.Equal(after.Moves, before.Moves) {
		t.Errorf("moves %v -> %v", before.Moves, after.Moves)
	}
	if after.Replication != directory.DefaultReplication() {
		t.Errorf("policy %+v, want rf 1 min_isr 1", after.Replication)
	}
	if n := after.StoredReplicaSets(); n != 0 {
		t.Errorf("%d slots have a stored set, want none at rf 1", n)
	}
	for i, set := range after.ReplicaSets() {
		if owner := after.Owner(slots.MustNew(i)); set.Epoch != 0 || !slices.Equal(set.ISR, []string{owner}) || len(set.Learners) != 0 {
			t.Fatalf("slot %d: set %+v, want its owner %s alone at epoch 0", i, set, owner)
		}
	}
	histAfter, err := d3.History(testCtx(t), 0)
	if err != nil || !slices.EqualFunc(histAfter, histBefore, func(a, b directory.Change) bool {
		return a.Version == b.Version && a.Kind == b.Kind && a.Reason == b.Reason
	}) {
		t.Errorf("history changed (%v): %d entries before, %d after", err, len(histBefore), len(histAfter))
	}
	if got, err := ctl.Get(testCtx(t), plan.ID); err != nil || !slices.EqualFunc(got.Moves, plan.Moves, func(a, b mover.PlannedMove) bool { return a.Slot == b.Slot && a.To == b.To }) {
		t.Errorf("plan after the upgrade: %v, %v", got, err)
	}
	if res, err := d3.PlanResults(testCtx(t), plan.ID); err != nil || res[3].Status != directory.ResultSkipped {
		t.Errorf("plan results after the upgrade: %v, %v", res, err)
	}

	// The move in flight finishes under schema 3; running the migrations
	// again changes nothing.
	inFlight := after.Moves[0]
	if _, err := d3.AdvanceMove(testCtx(t), inFlight.Slot, inFlight.MoveID, directory.PhaseFenced); err != nil {
		t.Fatal(err)
	}
	if _, err := d3.CommitMove(testCtx(t), inFlight.Slot, inFlight.MoveID, "t"); err != nil {
		t.Fatal(err)
	}
	if applied, err := migrations.Apply(testCtx(t), d3); err != nil || len(applied) != 0 {
		t.Fatalf("second Apply = %v, %v", applied, err)
	}
	// A schema-2 binary refuses the new schema.
	if _, err := d2.Snapshot(testCtx(t)); err == nil || !strings.Contains(err.Error(), "found schema 3") {
		t.Fatalf("schema-2 binary read after the upgrade: %v, want a refusal naming schema 3", err)
	}
}
