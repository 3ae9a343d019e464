package directory

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotd/slotd/slots"
)

// TestCreatePlanMove: a plan record, its run key and its move begun in one
// transaction, or none of them; each refusal leaves the table, the plan
// keys and the history as they were.
func TestCreatePlanMove(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare runs after the cache is warm; it returns the PlanMove to
		// write (slot s of n0 to n2 unless it changes it).
		prepare func(t *testing.T, d, other *Directory, pm *PlanMove)
		want    error // nil: stored and begun
	}{
		{name: "on the cached table", prepare: func(*testing.T, *Directory, *Directory, *PlanMove) {}},
		{name: "table changed by another process", prepare: func(t *testing.T, _, other *Directory, pm *PlanMove) {
			if _, err := other.SetWeight(testCtx(t), "n1", 3, "other"); err != nil {
				t.Fatal(err)
			}
		}, want: ErrConflict},
		{name: "table changed, no version expected", prepare: func(t *testing.T, _, other *Directory, pm *PlanMove) {
			if _, err := other.SetWeight(testCtx(t), "n1", 3, "other"); err != nil {
				t.Fatal(err)
			}
			pm.Spec.ExpectVersion = 0
		}},
		{name: "plan exists", prepare: func(t *testing.T, _, other *Directory, pm *PlanMove) {
			if err := other.CreatePlan(testCtx(t), pm.Spec.PlanID, []byte("other")); err != nil {
				t.Fatal(err)
			}
			pm.PlansThrough = 0
		}, want: ErrConflict},
		{name: "a plan written after the caller looked", prepare: func(t *testing.T, _, other *Directory, pm *PlanMove) {
			if err := other.CreatePlan(testCtx(t), "q", []byte("other")); err != nil {
				t.Fatal(err)
			}
		}, want: ErrConflict},
		{name: "target not active", prepare: func(t *testing.T, d, _ *Directory, pm *PlanMove) {
			if _, err := d.Drain(testCtx(t), "n2", "test", "test"); err != nil {
				t.Fatal(err)
			}
			pm.Spec.ExpectVersion++
		}, want: ErrPrecondition},
		{name: "slot in flight", prepare: func(t *testing.T, d, _ *Directory, pm *PlanMove) {
			if _, err := d.BeginMove(testCtx(t), MoveSpec{Slot: pm.Spec.Slot, From: "n0", To: "n1", By: "test"}); err != nil {
				t.Fatal(err)
			}
			pm.Spec.ExpectVersion++
		}, want: ErrPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, d, snap := setup(t, 3, func(cfg *Config) { cfg.Registerer = prometheus.NewRegistry() })
			other := newDir(t, c, nil)
			ctx := testCtx(t)
			if _, err := d.SetWeight(ctx, "n0", 2, "test"); err != nil { // warms d's cache
				t.Fatal(err)
			}
			_, through, err := d.PlanKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s := slots.MustNew(ownerSlot(t, snap, "n0"))
			pm := PlanMove{
				Spec: MoveSpec{Slot: s, From: "n0", To: "n2", MoveID: "p.0", PlanID: "p", By: "test", ExpectVersion: snap.Version + 1},
				Plan: []byte(`{"id":"p"}`), PlansThrough: through,
			}
			tc.prepare(t, d, other, &pm)
			before, err := d.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			plansBefore, err := d.Plans(ctx)
			if err != nil {
				t.Fatal(err)
			}
			applied, reads := txnCount(t, d, "applied"), d.tableReads.Load()
			mv, err := d.CreatePlanMove(ctx, pm)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("create plan move: %v, want %v", err, tc.want)
			}
			after, serr := d.Snapshot(ctx)
			if serr != nil {
				t.Fatal(serr)
			}
			running, rerr := d.Running(ctx, "p")
			if rerr != nil {
				t.Fatal(rerr)
			}
			plans, perr := d.Plans(ctx)
			if perr != nil {
				t.Fatal(perr)
			}
			if tc.want != nil {
				if after.Version != before.Version || running || len(plans) != len(plansBefore) {
					t.Fatalf("refused, yet version %d -> %d, run key %v, %d -> %d plans", before.Version, after.Version, running, len(plansBefore), len(plans))
				}
				return
			}
			got, moving := after.Move(s)
			switch {
			case !moving || got.MoveID != "p.0" || got.PlanID != "p" || got.Phase != PhaseCopy || *mv != got:
				t.Fatalf("slot %d: in flight %v as %+v, returned %+v", s.Int(), moving, got, mv)
			case after.Version != before.Version+1:
				t.Fatalf("version %d -> %d, want one change", before.Version, after.Version)
			case !running || string(plans["p"].Data) != `{"id":"p"}`:
				t.Fatalf("run key %v, plan record %q", running, plans["p"].Data)
			}
			if d := txnCount(t, d, "applied") - applied; d != 1 {
				t.Errorf("%d transactions applied, want 1", d)
			}
			if pm.Spec.ExpectVersion != 0 && d.tableReads.Load()-reads != 1 { // the Snapshot above
				t.Errorf("%d table reads besides the check's, want 0 (the cache holds the table)", d.tableReads.Load()-reads-1)
			}
			h, err := d.History(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != 1 || h[0].Kind != ChangeMoveBegin || h[0].PlanID != "p" || h[0].Version != after.Version {
				t.Fatalf("history %+v, want the begin at version %d", h, after.Version)
			}
			// The executor's BeginMove of the same move finds it begun and
			// writes nothing.
			again, err := d.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n2", MoveID: "p.0", PlanID: "p", By: "test"})
			if err != nil || *again != got {
				t.Fatalf("begin again: %+v, %v", again, err)
			}
			if d := txnCount(t, d, "applied") - applied; d != 1 {
				t.Errorf("%d transactions applied with the begin again, want 1", d)
			}
		})
	}
}
