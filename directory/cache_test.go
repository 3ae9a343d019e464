package directory

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// TestStaleWriteCache shows that a Directory whose cached state is behind
// (another process wrote since) neither loses a write nor reports a
// precondition the fresh table does not have.
func TestStaleWriteCache(t *testing.T) {
	c, a, snap := setup(t, 3, nil)
	b := newDir(t, c, nil)
	ctx := testCtx(t)
	s := slots.MustNew(7)
	owner := snap.Owner(s)
	var other string
	for _, n := range snap.Nodes {
		if n.ID != owner {
			other = n.ID
			break
		}
	}
	// b writes once, so it caches the table as of that write.
	if _, err := b.SetWeight(ctx, "n0", 2, "b"); err != nil {
		t.Fatal(err)
	}
	// a moves slot 7 behind b's back.
	mv, err := a.BeginMove(ctx, MoveSpec{Slot: s, From: owner, To: other, By: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AdvanceMove(ctx, s, mv.MoveID, PhaseFenced); err != nil {
		t.Fatal(err)
	}
	v, err := a.CommitMove(ctx, s, mv.MoveID, "a")
	if err != nil {
		t.Fatal(err)
	}
	// On b's stale cache, owner still owns the slot; on the table it does
	// not: the move from the old owner must be refused...
	if _, err := b.BeginMove(ctx, MoveSpec{Slot: s, From: owner, To: other, By: "b"}); !errors.Is(err, ErrPrecondition) && !errors.Is(err, ErrInvalid) {
		t.Fatalf("stale move accepted or wrong error: %v", err)
	}
	// ...and the move from the new owner, refused by the stale cache,
	// accepted.
	if _, err := b.BeginMove(ctx, MoveSpec{Slot: s, From: other, To: owner, By: "b"}); err != nil {
		t.Fatalf("valid move refused on a stale cache: %v", err)
	}
	after, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != v+1 {
		t.Fatalf("version %d, want %d", after.Version, v+1)
	}
	if n, _ := after.Node("n0"); n.Weight != 2 {
		t.Fatalf("b's earlier write lost: weight %d", n.Weight)
	}
}

// TestBootstrapManyNodes bootstraps more nodes than one etcd transaction
// can register beside the owner chunks.
func TestBootstrapManyNodes(t *testing.T) {
	c := etcdtest.New(t)
	d := newDir(t, c, nil)
	snap, err := d.Bootstrap(testCtx(t), testNodes(200), 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	counts := snap.Counts()
	if len(counts) != 200 {
		t.Fatalf("%d nodes in the table", len(counts))
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != slots.Count {
		t.Fatalf("%d slots owned", total)
	}
	if _, err := d.Bootstrap(testCtx(t), testNodes(200), 0, "test"); !errors.Is(err, ErrAlreadyBootstrapped) {
		t.Fatalf("second bootstrap: %v", err)
	}
}

// TestRunKeyOnCachedTable: the cached table does not see run keys written
// since this process's last change. A plan stored applying right before
// its first move must begin it in one transaction (the run key's compare
// decides, not the cache), and a plan whose run key is gone, or never
// was, must still be refused however the cache remembers it.
func TestRunKeyOnCachedTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare runs on a warm cache, after a's last change.
		prepare func(t *testing.T, a, b *Directory)
		want    error // nil: begun
	}{
		{name: "run key created since", prepare: func(t *testing.T, a, _ *Directory) {
			if err := a.CreatePlanRun(testCtx(t), "p", []byte("plan"), RunStart); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "run key created by another process", prepare: func(t *testing.T, _, b *Directory) {
			if err := b.CreatePlanRun(testCtx(t), "p", []byte("plan"), RunStart); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "no run key", prepare: func(*testing.T, *Directory, *Directory) {}, want: ErrPlanNotRunning},
		{name: "run key deleted by another process after the cache saw it", prepare: func(t *testing.T, a, b *Directory) {
			ctx := testCtx(t)
			if err := b.CreatePlanRun(ctx, "p", []byte("plan"), RunStart); err != nil {
				t.Fatal(err)
			}
			// A first move of the plan makes a's cache hold the run key.
			snap, err := a.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s := slots.MustNew(ownerSlot(t, snap, "n1"))
			if _, err := a.BeginMove(ctx, MoveSpec{Slot: s, From: "n1", To: "n2", PlanID: "p", By: "a"}); err != nil {
				t.Fatal(err)
			}
			if err := b.UpdatePlanRun(ctx, "p", func(old []byte) ([]byte, Run, error) { return old, RunStop, nil }); err != nil {
				t.Fatal(err)
			}
		}, want: ErrPlanNotRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// With a registry, a keeps metrics: its transactions are counted.
			c, a, snap := setup(t, 3, func(cfg *Config) { cfg.Registerer = prometheus.NewRegistry() })
			b := newDir(t, c, nil)
			ctx := testCtx(t)
			// a's last change warms its cache.
			if _, err := a.SetWeight(ctx, "n0", 2, "a"); err != nil {
				t.Fatal(err)
			}
			tc.prepare(t, a, b)
			applied, conflicts, reads := txnCount(t, a, "applied"), txnCount(t, a, "conflict"), a.tableReads.Load()
			s := slots.MustNew(ownerSlot(t, snap, "n0"))
			_, err := a.BeginMove(ctx, MoveSpec{Slot: s, From: "n0", To: "n2", PlanID: "p", By: "a"})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("begin: %v, want %v", err, tc.want)
			}
			after, serr := a.Snapshot(ctx)
			if serr != nil {
				t.Fatal(serr)
			}
			if _, moving := after.Move(s); moving != (tc.want == nil) {
				t.Fatalf("slot %d in flight %v after begin: %v", s.Int(), moving, err)
			}
			if tc.want == nil {
				if d := txnCount(t, a, "applied") - applied; d != 1 {
					t.Errorf("%d transactions applied for the begin, want 1", d)
				}
				if d := txnCount(t, a, "conflict") - conflicts; d != 0 {
					t.Errorf("%d transactions refused by a compare for the begin, want 0", d)
				}
				// The Snapshot above is one read; the begin made none.
				if d := a.tableReads.Load() - reads; d != 1 {
					t.Errorf("%d table reads for the begin, want 0 (the cache holds the table)", d-1)
				}
			}
		})
	}
}

// txnCount is how many of d's transactions ended with result.
func txnCount(t *testing.T, d *Directory, result string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := d.m.txns.WithLabelValues(result).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
