package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/internal/manualclock"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

type recNode struct {
	n     *Node
	m     *StaticMap
	st    *memStore
	clock *manualclock.Clock
	reg   *prometheus.Registry
	fresh *slotmap.Map // when set, FreshMap returns it
}

// newRecNode returns node "a" owning every slot, with its background work
// (drops) running and reconciliation left to the test.
func newRecNode(t *testing.T) *recNode {
	t.Helper()
	r := &recNode{m: new(StaticMap), st: newMemStore(), clock: manualclock.New(time.Unix(1000, 0)), reg: prometheus.NewRegistry()}
	r.m.SetAll("a", "127.0.0.1:1")
	n, err := New(Config{
		ID: "a", Store: r.st, Map: r.m, StateDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Clock: r.clock, ReconcileInterval: -1, Registerer: r.reg,
		FreshMap: func(context.Context) (*slotmap.Map, error) {
			if r.fresh != nil {
				return r.fresh, nil
			}
			return r.m.Map(), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.n = n
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; n.Close() })
	return r
}

func (r *recNode) pass(t *testing.T) int {
	t.Helper()
	acted, err := r.n.ReconcileOnce(context.Background())
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return acted
}

func (r *recNode) fill(t *testing.T, s slots.Slot, keys int) {
	t.Helper()
	batch := make([]Mutation, keys)
	for i := range batch {
		batch[i] = Mutation{Key: []byte{byte(i)}, Value: make([]byte, 100)}
	}
	if err := r.st.Apply(context.Background(), s, batch); err != nil {
		t.Fatal(err)
	}
}

func (r *recNode) empty(s slots.Slot) bool {
	k, _, _ := r.st.SlotSize(context.Background(), s)
	return k == 0
}

func TestReconcileDropsUnexplainedData(t *testing.T) {
	r := newRecNode(t)
	gone, kept, incoming := slots.MustNew(10), slots.MustNew(11), slots.MustNew(12)
	for _, s := range []slots.Slot{gone, kept, incoming} {
		r.fill(t, s, 5)
	}
	// gone and incoming belong to b; incoming is coming back to a.
	r.m.Set("b", "127.0.0.1:2", gone, incoming)
	r.m.SetMigrations(slotmap.Migration{Slot: incoming, From: "b", To: "a", Phase: slotdv1.MovePhase_MOVE_PHASE_COPYING, MoveID: "m-in"})

	if got := r.pass(t); got != 0 {
		t.Fatalf("first pass acted %d times, want 0 (grace)", got)
	}
	if r.n.OrphanBytes() != 5*101 {
		t.Fatalf("orphan bytes %d, want %d (slot %d only)", r.n.OrphanBytes(), 5*101, gone.Int())
	}
	r.clock.Advance(DefaultReconcileGrace - time.Second)
	if got := r.pass(t); got != 0 {
		t.Fatalf("inside the grace: %d actions", got)
	}
	// A fresh map that still shows a as owner (a's map is ahead of what
	// slotd read? no: a's map is the one behind) keeps the data.
	r.fresh = mustStatic(t, "a")
	r.clock.Advance(2 * time.Second)
	if got := r.pass(t); got != 0 || r.empty(gone) {
		t.Fatalf("fresh map owns the slot: %d actions, slot empty %v", got, r.empty(gone))
	}
	// The pass that saw the fresh map forgot the finding: the grace starts over.
	r.fresh = nil
	if got := r.pass(t); got != 0 {
		t.Fatalf("grace restarted: %d actions", got)
	}
	r.clock.Advance(DefaultReconcileGrace)
	if got := r.pass(t); got != 1 {
		t.Fatalf("after the grace: %d actions, want 1 drop", got)
	}
	waitfor.True(t, 10*time.Second, "dropped slot empty", func() bool { return r.empty(gone) && !r.n.Dropping(gone) })
	r.pass(t)
	if r.n.OrphanBytes() != 0 || r.empty(kept) || r.empty(incoming) {
		t.Fatalf("orphan %d; kept empty %v; incoming empty %v", r.n.OrphanBytes(), r.empty(kept), r.empty(incoming))
	}
	if v := testutil.ToFloat64(r.n.m.reconcileActions.WithLabelValues(actDrop)); v != 1 {
		t.Fatalf("drop actions %v", v)
	}
	if v := testutil.ToFloat64(r.n.m.orphanBytes); v != 0 {
		t.Fatalf("orphan gauge %v", v)
	}
	// The move in flight ends by abort: the partial copy goes after the grace.
	r.m.SetMigrations()
	r.pass(t)
	r.clock.Advance(DefaultReconcileGrace)
	if got := r.pass(t); got != 1 {
		t.Fatalf("aborted import: %d actions", got)
	}
	waitfor.True(t, 10*time.Second, "aborted copy dropped", func() bool { return r.empty(incoming) && !r.n.Dropping(incoming) })
}

// mustStatic is a map where id owns every slot, at a high version.
func mustStatic(t *testing.T, id string) *slotmap.Map {
	t.Helper()
	m := new(StaticMap)
	m.SetAll(id, "127.0.0.1:1")
	return m.Map()
}

func TestReconcileFenceRules(t *testing.T) {
	ctx := context.Background()
	r := newRecNode(t)
	s, handed := slots.MustNew(20), slots.MustNew(21)
	r.fill(t, s, 3)
	r.fill(t, handed, 3)
	r.m.Set("b", "127.0.0.1:2", slots.MustNew(99))
	for _, x := range []slots.Slot{s, handed} {
		if _, err := r.n.StartCapture(ctx, x, "m-"+x.String()); err != nil {
			t.Fatal(err)
		}
		if _, err := r.n.Fence(ctx, x, "m-"+x.String(), 0); err != nil {
			t.Fatal(err)
		}
	}
	moving := func(x slots.Slot) slotmap.Migration {
		return slotmap.Migration{Slot: x, From: "a", To: "b", Phase: slotdv1.MovePhase_MOVE_PHASE_FENCED, MoveID: "m-" + x.String()}
	}
	r.m.SetMigrations(moving(s), moving(handed))
	r.pass(t)
	r.clock.Advance(2 * DefaultReconcileGrace)
	if got := r.pass(t); got != 0 || !r.n.Fenced(s) {
		t.Fatalf("moves in flight explain the fences: %d actions, fenced %v", got, r.n.Fenced(s))
	}

	// s's move aborts, but the unfence never arrived; handed's commits.
	// a's own map lags: it shows both moves gone and a still owning both.
	// The fresh map has handed at b: that fence must stay.
	r.m.SetMigrations()
	fresh := new(StaticMap)
	fresh.SetAll("a", "127.0.0.1:1")
	fresh.Set("b", "127.0.0.1:2", handed)
	r.fresh = fresh.Map()
	r.pass(t)
	r.clock.Advance(DefaultReconcileGrace)
	r.pass(t)
	if r.n.Fenced(s) || !r.n.Fenced(handed) {
		t.Fatalf("after the grace: s fenced %v (want lifted), handed fenced %v (want kept)", r.n.Fenced(s), r.n.Fenced(handed))
	}
	if r.n.captureOf(s) != nil || r.n.captureOf(handed) == nil {
		t.Fatalf("captures: s %v (want ended), handed %v (want kept)", r.n.captureOf(s), r.n.captureOf(handed))
	}
	if err := r.n.Write(ctx, []byte("{x}"), put("{x}", "1")); err != nil && !errors.Is(err, ErrFenced) {
		t.Fatalf("write: %v", err)
	}

	// a's map catches up: handed is b's. It is dropped, and its fence goes
	// with the last key.
	r.m.Set("b", "127.0.0.1:2", handed)
	r.fresh = nil
	r.pass(t)
	r.clock.Advance(DefaultReconcileGrace)
	if got := r.pass(t); got != 1 {
		t.Fatalf("handed-off slot: %d actions, want 1 drop", got)
	}
	waitfor.True(t, 10*time.Second, "handed-off slot dropped and unfenced", func() bool {
		return r.empty(handed) && !r.n.Fenced(handed) && !r.n.Dropping(handed)
	})
	if r.n.captureOf(handed) != nil {
		t.Fatal("capture of the dropped slot still runs")
	}
	r.pass(t)
	if r.n.OrphanBytes() != 0 {
		t.Fatalf("orphan bytes %d", r.n.OrphanBytes())
	}
}

func TestReconcileForgetsFinishedImport(t *testing.T) {
	ctx := context.Background()
	r := newRecNode(t)
	s := slots.MustNew(30)
	r.m.Set("b", "127.0.0.1:2", s)
	if _, _, err := r.n.ImportSnapshot(ctx, s, "m1", SnapshotBatch{BatchSeq: 1, Entries: []Entry{{Key: keyIn(s), Value: []byte("v")}}, Done: true}); err != nil {
		t.Fatalf("import: %v", err)
	}
	// The move commits: a owns the slot, the import's progress is left.
	r.m.Set("a", "127.0.0.1:1", s)
	r.pass(t)
	r.clock.Advance(DefaultReconcileGrace)
	if got := r.pass(t); got != 1 {
		t.Fatalf("%d actions, want 1 (forget the import)", got)
	}
	if st := r.n.ImportStatus(s, "m1"); st.LastBatchSeq != 0 || r.empty(s) {
		t.Fatalf("import state %+v, slot empty %v", st, r.empty(s))
	}
}

func TestRequireMapVersion(t *testing.T) {
	ctx := context.Background()
	r := newRecNode(t)
	s := slots.MustNew(40)
	r.fill(t, s, 1)
	r.m.Set("b", "127.0.0.1:2", s)
	r.n.RequireMapVersion(r.m.Version() + 1)
	r.n.RequireMapVersion(1) // lower: ignored
	if err := r.n.Write(ctx, []byte("k"), put("k", "v")); !errors.Is(err, ErrNoMap) {
		t.Fatalf("write with a map older than required: %v, want ErrNoMap", err)
	}
	if err := r.n.CheckRead([]byte("k")); !errors.Is(err, ErrNoMap) {
		t.Fatalf("read with a map older than required: %v, want ErrNoMap", err)
	}
	r.pass(t)
	r.clock.Advance(2 * DefaultReconcileGrace)
	if got := r.pass(t); got != 0 || r.n.OrphanBytes() != 0 {
		t.Fatalf("reconciled against an old map: %d actions, orphan %d", got, r.n.OrphanBytes())
	}
	r.m.Set("a", "127.0.0.1:1", slots.MustNew(41)) // the map reaches the version
	if err := r.n.CheckRead([]byte("k")); err != nil && !errors.Is(err, ErrMoved) {
		t.Fatalf("read at the required version: %v", err)
	}
	r.pass(t)
	r.clock.Advance(DefaultReconcileGrace)
	if got := r.pass(t); got != 1 {
		t.Fatalf("at the required version: %d actions, want 1", got)
	}
}

// keyIn returns a key of slot s.
func keyIn(s slots.Slot) []byte {
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if slots.ForString(k) == s {
			return []byte(k)
		}
	}
}

// TestGainedWithoutImportStartsEmpty: a slot that comes to the node with no
// import (a failed node's slot given to it empty) while it still holds an
// old copy is cleared before it serves anything of it; a slot that came by
// an import keeps what the import brought.
func TestGainedWithoutImportStartsEmpty(t *testing.T) {
	ctx := context.Background()
	r := newRecNode(t)
	old, imported := slots.MustNew(50), slots.MustNew(51)
	r.m.Set("b", "127.0.0.1:2", old, imported)
	r.n.checkGained(r.m.Version()) // as Run's ticker would: the map a gain is compared with
	k := keyIn(old)
	if err := r.st.Apply(ctx, old, []Mutation{{Key: k, Value: []byte("stale")}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.n.ImportSnapshot(ctx, imported, "m1", SnapshotBatch{BatchSeq: 1, Entries: []Entry{{Key: keyIn(imported), Value: []byte("moved")}}, Done: true}); err != nil {
		t.Fatal(err)
	}
	r.m.Set("a", "127.0.0.1:1", old, imported)
	// Run looks at the map every takeoverTick too, so the clearing may have
	// started, or even ended, before this read: the old copy is either being
	// cleared (ErrDropping) or gone, never served.
	if err := r.n.CheckRead(k); err != nil && !errors.Is(err, ErrDropping) {
		t.Fatalf("read of the old copy: %v, want ErrDropping", err)
	} else if err == nil && !r.empty(old) {
		t.Fatal("the old copy is served: the slot reads as owned while it still holds the stale value")
	}
	waitfor.True(t, 10*time.Second, "old copy cleared", func() bool { return r.empty(old) && !r.n.Dropping(old) })
	if err := r.n.Write(ctx, k, put(string(k), "new")); err != nil {
		t.Fatalf("write after the clearing: %v", err)
	}
	if r.empty(imported) {
		t.Fatal("the imported slot was cleared")
	}
	if err := r.n.CheckRead(keyIn(imported)); err != nil {
		t.Fatalf("read of the imported slot: %v", err)
	}
}

// TestImportedSlotSurvivesForgetting: a slot that came by an import keeps
// its data even when reconciliation forgets the import's progress before
// the takeover's own look at the new map (the progress is what says the
// slot came by a move).
func TestImportedSlotSurvivesForgetting(t *testing.T) {
	ctx := context.Background()
	r := newRecNode(t)
	s := slots.MustNew(60)
	r.m.Set("b", "127.0.0.1:2", s)
	r.n.checkGained(r.m.Version())
	if _, _, err := r.n.ImportSnapshot(ctx, s, "m1", SnapshotBatch{BatchSeq: 1, Entries: []Entry{{Key: keyIn(s), Value: []byte("moved")}}, Done: true}); err != nil {
		t.Fatal(err)
	}
	r.m.Set("a", "127.0.0.1:1", s) // the commit
	r.pass(t)
	r.clock.Advance(DefaultReconcileGrace)
	if got := r.pass(t); got != 1 {
		t.Fatalf("%d actions, want 1 (forget the import)", got)
	}
	r.n.checkGained(r.m.Version())
	if err := r.n.CheckRead(keyIn(s)); err != nil || r.empty(s) || r.n.Dropping(s) {
		t.Fatalf("imported slot after its import was forgotten: read %v, empty %v, dropping %v", err, r.empty(s), r.n.Dropping(s))
	}
}
