package slotkv

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/manualclock"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slots"
)

// These tests run real slotkv stores against slotd's services (real gRPC,
// embedded etcd) with no mover: moves are driven by hand through the
// directory and the node library, and nobody ever asks a store to drop
// anything. Reconciliation alone must leave every store clean.

// TestReconcileCommitNobodyDrops: a move commits and nobody asks the source
// to drop its copy (the leader died right after the commit). The source
// drops it on its own, under the grace and the throttle; the target keeps
// its copy; the orphan bytes ride the heartbeat to slotd and back to 0.
func TestReconcileCommitNobodyDrops(t *testing.T) {
	c := newRecCluster(t)
	c.bootstrap()
	a, b := c.start("a"), c.start("b")
	s := c.slotOf("a")
	v0, _ := c.dir.Version(context.Background())
	c.mapAt(a, v0)
	write(t, a, s, 20)
	id := c.begin(s, "a", "b")
	c.mapAt(b, v0+1)
	copySlot(t, a, b, s, id, true)
	v := c.commit(s, id)
	c.mapAt(a, v)
	c.mapAt(b, v)

	if _, err := a.n().ReconcileOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := bytesOf(t, a, s)
	if got := a.n().OrphanBytes(); got != want || want == 0 {
		t.Fatalf("a's orphan bytes %d, want %d", got, want)
	}
	// The figure rides the heartbeat into the node's liveness record and
	// comes back in ListNodes, on any replica.
	admin := slotdv1.NewAdminClient(c.conn)
	dirc := slotdv1.NewDirectoryClient(c.conn)
	orphanAt := func(wantBytes int64) {
		t.Helper()
		reg, err := admin.RegisterNode(context.Background(), &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "a", Address: "127.0.0.1:1"}})
		if err != nil {
			t.Fatal(err)
		}
		b := a.n().OrphanBytes()
		if _, err := admin.Heartbeat(context.Background(), &slotdv1.HeartbeatRequest{NodeId: "a", Session: reg.GetSession(), LeaseId: reg.GetLeaseId(), OrphanBytes: &b}); err != nil {
			t.Fatal(err)
		}
		ln, err := dirc.ListNodes(context.Background(), &slotdv1.ListNodesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ln.GetNodes() {
			if n.GetNode().GetId() == "a" && (n.OrphanBytes == nil || n.GetOrphanBytes() != wantBytes) {
				t.Fatalf("ListNodes: a's orphan bytes %v, want %d", n.OrphanBytes, wantBytes)
			}
		}
	}
	orphanAt(want)

	c.reconcile(a)
	c.reconcile(b)
	c.clean(a)
	c.clean(b)
	if bytesOf(t, a, s) != 0 || a.n().Fenced(s) {
		t.Fatalf("source: %d bytes left, fenced %v", bytesOf(t, a, s), a.n().Fenced(s))
	}
	if bytesOf(t, b, s) != want {
		t.Fatalf("target holds %d bytes, want %d", bytesOf(t, b, s), want)
	}
	if st := b.n().ImportStatus(s, id); st.LastBatchSeq != 0 {
		t.Fatalf("target still keeps the finished import's progress: %+v", st)
	}
	orphanAt(0)
}

// TestReconcileSourceBackAfterManyChanges: the source is down when its slot
// commits away and comes back after more than 1,000 later changes (the old
// leader's look-back would have missed it). It drops its copy alone.
func TestReconcileSourceBackAfterManyChanges(t *testing.T) {
	ctx := context.Background()
	c := newRecCluster(t)
	c.bootstrap()
	a, b := c.start("a"), c.start("b")
	s := c.slotOf("a")
	v0, _ := c.dir.Version(ctx)
	c.mapAt(a, v0)
	write(t, a, s, 10)
	id := c.begin(s, "a", "b")
	c.mapAt(b, v0+1)
	copySlot(t, a, b, s, id, true)
	a.stop()
	c.commit(s, id)
	for i := range 1001 {
		if _, err := c.dir.SetWeight(ctx, "b", 1+i%2, "test"); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := c.dir.Version(ctx)
	a = c.start("a")
	c.mapAt(a, v)
	if !a.n().Fenced(s) || bytesOf(t, a, s) == 0 {
		t.Fatal("the source lost its fence or copy while down")
	}
	c.reconcile(a)
	c.clean(a)
	c.clean(b)
	if bytesOf(t, a, s) != 0 || a.n().Fenced(s) || bytesOf(t, b, s) == 0 {
		t.Fatalf("source %d bytes fenced %v; target %d bytes", bytesOf(t, a, s), a.n().Fenced(s), bytesOf(t, b, s))
	}
}

// TestReconcileAbortWhileTargetAway: a fenced move aborts while both its
// target and its source are away, so neither hears of it. Back, the source
// lifts its fence (the fresh map shows the move over and the slot its own)
// and takes writes; the target drops its partial copy. The move is
// recorded fenced (an older mover's AdvanceMove) or still in its copy
// phase: the mover fences without a transaction and records the fence in
// its commit, so one that dies in between leaves the fence unrecorded.
func TestReconcileAbortWhileTargetAway(t *testing.T) {
	for _, recorded := range []directory.Phase{directory.PhaseFenced, directory.PhaseCopy} {
		t.Run(string(recorded), func(t *testing.T) { testAbortWhileTargetAway(t, recorded) })
	}
}

func testAbortWhileTargetAway(t *testing.T, recorded directory.Phase) {
	ctx := context.Background()
	c := newRecCluster(t)
	c.bootstrap()
	a, b := c.start("a"), c.start("b")
	s := c.slotOf("a")
	v0, _ := c.dir.Version(ctx)
	c.mapAt(a, v0)
	write(t, a, s, 10)
	id := c.begin(s, "a", "b")
	c.mapAt(b, v0+1)
	copySlot(t, a, b, s, id, true)
	seen := v0 + 1
	if recorded == directory.PhaseFenced {
		if _, err := c.dir.AdvanceMove(ctx, s, id, directory.PhaseFenced); err != nil {
			t.Fatal(err)
		}
		seen++
	}
	// Seen in flight: no pass may lift its fence, whatever its phase.
	c.mapAt(a, seen)
	c.reconcile(a)
	if !a.n().Fenced(s) {
		t.Fatal("fence lifted while its move is in flight")
	}
	a.stop()
	b.stop()
	v, err := c.dir.AbortMove(ctx, s, id, "target unreachable", "test")
	if err != nil {
		t.Fatal(err)
	}
	a, b = c.start("a"), c.start("b")
	c.mapAt(a, v)
	c.mapAt(b, v)
	if err := a.n().Write(ctx, firstKey(s), func() ([]node.Mutation, error) { return nil, nil }); !errors.Is(err, node.ErrFenced) {
		t.Fatalf("write before reconciliation: %v, want fenced", err)
	}
	c.reconcile(a)
	c.reconcile(b)
	c.clean(a)
	c.clean(b)
	if a.n().Fenced(s) || bytesOf(t, a, s) == 0 || bytesOf(t, b, s) != 0 {
		t.Fatalf("source fenced %v, %d bytes; target %d bytes", a.n().Fenced(s), bytesOf(t, a, s), bytesOf(t, b, s))
	}
	write(t, a, s, 1)
}

func firstKey(s slots.Slot) []byte {
	for i := 0; ; i++ {
		k := []byte("x" + time.Duration(i).String())
		if slots.ForKey(k) == s {
			return k
		}
	}
}

// TestFailedNodeComesBackWithOldData: c is declared failed while away; its
// slots go to a and b, empty, and take writes at once (no import). c comes
// back with its old data under its old id: it serves none of it (it owns
// nothing, and never a map from before it registered again), drops it all
// through reconciliation, and rejoins empty.
func TestFailedNodeComesBackWithOldData(t *testing.T) {
	ctx := context.Background()
	fake := manualclock.New(time.Now())
	c := newRecCluster(t, func(cfg *directory.Config) {
		cfg.Now, cfg.DownAfter, cfg.HoldDown = fake.Now, 5*time.Second, time.Second
	})
	c.bootstrap("a", "b", "c")
	a, b, cn := c.start("a"), c.start("b"), c.start("c")
	s := c.slotOf("c")
	v0, _ := c.dir.Version(ctx)
	c.mapAt(cn, v0)
	write(t, cn, s, 10)
	cn.stop()

	for _, id := range []string{"a", "b"} {
		if err := c.dir.Touch(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	fake.Advance(10 * time.Second)
	if _, err := c.dir.CheckLiveness(ctx); err != nil {
		t.Fatal(err)
	}
	fake.Advance(2 * time.Second)
	rc := slotdv1.NewRecoveryClient(c.conn)
	resp, err := rc.FailNode(ctx, &slotdv1.FailNodeRequest{NodeId: "c", AcceptDataLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.dir.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]*recStore{"a": a, "b": b}[snap.Owner(s)]
	c.mapAt(owner, resp.GetVersion())
	write(t, owner, s, 3) // the new owner takes writes at once, empty
	if got := bytesOf(t, owner, s); got == 0 {
		t.Fatalf("new owner holds %d bytes", got)
	}

	// c comes back with its old data. Registering again gives it a new,
	// empty record; it never acts on a map from before that.
	cn = c.start("c")
	reg, err := slotdv1.NewAdminClient(c.conn).RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "c", Address: "127.0.0.1:3"}})
	if err != nil {
		t.Fatal(err)
	}
	cn.n().RequireMapVersion(reg.GetVersion())
	c.mapAt(cn, reg.GetVersion())
	if bytesOf(t, cn, s) == 0 {
		t.Fatal("c lost its old data before reconciliation")
	}
	for _, k := range [][]byte{firstKey(s)} {
		if err := cn.n().CheckRead(k); !errors.Is(err, node.ErrMoved) {
			t.Fatalf("c serves a read of its old slot: %v, want MOVED", err)
		}
		if err := cn.n().Write(ctx, k, func() ([]node.Mutation, error) { return nil, nil }); !errors.Is(err, node.ErrMoved) {
			t.Fatalf("c accepts a write for its old slot: %v, want MOVED", err)
		}
	}
	c.reconcile(cn)
	c.clean(cn)
	if bytesOf(t, cn, s) != 0 {
		t.Fatalf("c still holds %d bytes of its old slot", bytesOf(t, cn, s))
	}
	if snap, _ := c.dir.Snapshot(ctx); snap.Counts()["c"] != 0 {
		t.Fatal("c owns slots again")
	}
}

// BenchmarkReconcilePass is one reconciliation pass over a store holding
// about 50,000 keys of 100 bytes in the 8,192 even slots, a quarter of
// which (2,048) it no longer owns (their bytes are counted as orphans, so
// each of those is sized), with the grace not yet over:
// go test -run '^$' -bench ReconcilePass -benchtime 20x ./slotkv
func BenchmarkReconcilePass(b *testing.B) {
	ctx := context.Background()
	m := new(node.StaticMap)
	m.SetAll("a", "127.0.0.1:1")
	srv, err := Open(Config{ID: "a", DataDir: b.TempDir(), Map: m, NoSync: true, Logger: slog.New(slog.DiscardHandler), ReconcileInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	batches := map[slots.Slot][]node.Mutation{}
	for i := range 100_000 {
		k := []byte("bench:" + time.Duration(i).String())
		s := slots.ForKey(k)
		if s.Int()%2 == 1 {
			continue
		}
		batches[s] = append(batches[s], node.Mutation{Key: k, Value: make([]byte, 100)})
	}
	var gone []slots.Slot
	for s, batch := range batches {
		if err := srv.Engine().Apply(ctx, s, batch); err != nil {
			b.Fatal(err)
		}
		if s.Int()%8 == 0 {
			gone = append(gone, s)
		}
	}
	m.Set("b", "127.0.0.1:2", gone...)
	b.ResetTimer()
	for b.Loop() {
		if _, err := srv.Node().ReconcileOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(srv.Node().OrphanBytes()), "orphan-bytes")
}
