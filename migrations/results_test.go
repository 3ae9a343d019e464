package migrations_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"testing"
	"time"

	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/migrations"
	"github.com/slotd/slotd/mover"
)

// schemaDir returns a directory on a fresh etcd brought to schema `to` by
// the default steps.
func schemaDir(t *testing.T, to int) (*etcdtest.Cluster, *directory.Directory) {
	t.Helper()
	c := etcdtest.New(t)
	d := newDir(t, c.Client(), to)
	reg, err := migrations.NewRegistry(migrations.DefaultSteps()[:to]...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Apply(testCtx(t), d); err != nil {
		t.Fatal(err)
	}
	return c, d
}

// legacyRecord encodes a plan record as schema 1 stored it: gzip'd JSON.
func legacyRecord(t *testing.T, p any) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(p); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestUpgradeProgressToResults: schema 1 kept a plan's results in a
// "<id>.progress" record written now and then; schema 2's step turns them
// into directory results, gives an applying plan its run key, and deletes
// the progress records. Run twice, it changes nothing more; the mover then
// reads every move's outcome.
func TestUpgradeProgressToResults(t *testing.T) {
	_, dir := schemaDir(t, 1)
	now := time.Now().UTC()
	move := func(slot int, status, id string, fin time.Time) map[string]any {
		m := map[string]any{"slot": slot, "from": "n1", "to": "n2", "status": status}
		if id != "" {
			m["move_id"], m["finished"] = id, fin
		}
		return m
	}
	applying := map[string]any{"id": "p-1-abc", "state": "applying", "created": now, "moves": []any{
		move(1, "pending", "", now), move(2, "pending", "", now), move(3, "pending", "", now), move(4, "pending", "", now),
	}}
	done := map[string]any{"id": "p-0-def", "state": "done", "created": now.Add(-time.Hour), "moves": []any{
		move(5, "done", "p-0-def.0", now),
	}}
	for _, p := range []map[string]any{applying, done} {
		if err := dir.PutPlan(testCtx(t), p["id"].(string), legacyRecord(t, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := dir.PutPlan(testCtx(t), "p-1-abc.progress", []byte(`{"status":"dspa","errors":{"2":"boom"}}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := migrations.UpgradeResults(testCtx(t), dir); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := dir.PlanIDs(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("plan records after the upgrade: %v, want the two plans alone", ids)
	}
	ctl, err := mover.NewControl(mover.ControlConfig{Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ctl.Get(testCtx(t), "p-1-abc")
	if err != nil {
		t.Fatal(err)
	}
	want := []mover.MoveStatus{mover.MoveDone, mover.MoveSkipped, mover.MoveFailed, mover.MoveAborted}
	for i, m := range got.Moves {
		if m.Status != want[i] {
			t.Errorf("move %d: %s, want %s", i, m.Status, want[i])
		}
	}
	if got.Moves[2].Error != "boom" {
		t.Errorf("move 2 error %q", got.Moves[2].Error)
	}
	if run, err := dir.Running(testCtx(t), "p-1-abc"); err != nil || !run {
		t.Errorf("applying plan's run key: %v, %v", run, err)
	}
	if run, err := dir.Running(testCtx(t), "p-0-def"); err != nil || run {
		t.Errorf("done plan's run key: %v, %v", run, err)
	}
	res, err := dir.PlanResults(testCtx(t), "p-0-def")
	if err != nil || res[0].Status != directory.ResultDone {
		t.Errorf("done plan's results: %v, %v", res, err)
	}
}
