package slotkv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

// acked is what a writer knows it wrote: the last acknowledged state of
// every key it touched.
type acked struct {
	mu      sync.Mutex // guards the maps
	value   map[string][]byte
	version map[string]uint64
	deleted map[string]bool
}

func newAcked() *acked {
	return &acked{value: map[string][]byte{}, version: map[string]uint64{}, deleted: map[string]bool{}}
}

func (a *acked) put(k []byte, v []byte, ver uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.value[string(k)], a.version[string(k)], a.deleted[string(k)] = v, ver, false
}

func (a *acked) del(k []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.value, string(k))
	a.version[string(k)], a.deleted[string(k)] = 0, true
}

// write does one random write (put, compare-and-set or delete) of a key and
// records it once acknowledged. It returns the error of an unacknowledged
// write; a failed compare-and-set (a lost update) is reported on t.
func (a *acked) write(ctx context.Context, t testing.TB, kv kvpb.KVClient, key []byte, r *rand.Rand, i int) error {
	val := fmt.Appendf(nil, "v%d-%x", i, r.Uint64())
	switch r.IntN(10) {
	case 0:
		if _, err := kv.Delete(ctx, &kvpb.DeleteRequest{Key: key}); err != nil {
			return err
		}
		a.del(key)
	case 1, 2, 3:
		a.mu.Lock()
		exp := a.version[string(key)]
		a.mu.Unlock()
		resp, err := kv.CompareAndSet(ctx, &kvpb.CompareAndSetRequest{Key: key, ExpectedVersion: exp, Value: val})
		if err != nil {
			return err
		}
		if !resp.Swapped {
			t.Errorf("lost update: %s at version %d, store has %d", key, exp, resp.Version)
			return nil
		}
		a.put(key, val, resp.Version)
	default:
		resp, err := kv.Put(ctx, &kvpb.PutRequest{Key: key, Value: val})
		if err != nil {
			return err
		}
		a.put(key, val, resp.Version)
	}
	return nil
}

// verify checks that kv holds exactly the acknowledged state of slot s.
func (a *acked) verify(ctx context.Context, t testing.TB, kv kvpb.KVClient, s slots.Slot) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, ver := range a.version {
		if slots.ForString(k) != s {
			continue
		}
		got, err := kv.Get(ctx, &kvpb.GetRequest{Key: []byte(k)})
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		if a.deleted[k] {
			if got.Found {
				t.Errorf("%s: deleted, but found at version %d", k, got.Version)
			}
			continue
		}
		if !got.Found || !bytes.Equal(got.Value, a.value[k]) || got.Version != ver {
			t.Errorf("%s: acknowledged %q@%d, store has %q@%d (found %v)", k, a.value[k], ver, got.Value, got.Version, got.Found)
		}
	}
}

func fencedErr(err error) bool {
	_, ok := redirect.FencedFromError(err)
	return ok && status.Code(err) == codes.Unavailable
}

// TestCopySlotWhileWriting moves one slot from a to b the way the mover does
// while a writer keeps writing to it: after catch-up and fence the target
// holds every acknowledged write byte for byte; the source then answers
// MOVED and drops its copy.
func TestCopySlotWhileWriting(t *testing.T) {
	ctx := ctxT(t)
	m := new(node.StaticMap)
	a := startNode(t, "a", t.TempDir(), m, nodeOpts{noSync: true})
	b := startNode(t, "b", t.TempDir(), m, nodeOpts{noSync: true})
	m.SetAll("a", a.addr)
	m.Set("b", b.addr)

	keys, s := keysIn("moving", 500)
	other, otherSlot := keysIn("staying", 20)
	if otherSlot == s {
		t.Fatal("test keys share a slot")
	}
	ack := newAcked()
	r := rand.New(rand.NewPCG(1, 2))
	for i, k := range append(keys, other...) {
		if err := ack.write(ctx, t, a.kv, k, r, i); err != nil {
			t.Fatal(err)
		}
	}

	// Writers, each on its own keys (so "last acknowledged" is well
	// defined per key), run until the fence turns them away.
	const writers = 4
	var wg sync.WaitGroup
	writes := make([]int, writers)
	writerErr := make([]error, writers)
	var started sync.WaitGroup
	started.Add(writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := rand.New(rand.NewPCG(3, uint64(w)))
			mine := keys[w*len(keys)/writers : (w+1)*len(keys)/writers]
			for i := 0; ; i++ {
				if i == 20 {
					started.Done()
				}
				err := ack.write(ctx, t, a.kv, mine[wr.IntN(len(mine))], wr, i)
				if err != nil {
					if !fencedErr(err) {
						writerErr[w] = err
					}
					writes[w] = i
					if i < 20 {
						started.Done()
					}
					return
				}
			}
		}()
	}
	started.Wait()

	const move = "move-1"
	batches := exportAll(ctx, t, a, s, move, nil, 4<<10)
	if len(batches) < 3 {
		t.Fatalf("want several batches, got %d", len(batches))
	}
	importBatches(ctx, t, b, s, move, batches, 1)
	last, _ := replayChanges(ctx, t, a, b, s, move, batches[0].SnapshotSeq, false)
	last, _ = replayChanges(ctx, t, a, b, s, move, last, false)
	fr, err := a.store.Fence(ctx, &slotdv1.FenceRequest{Slot: uint32(s.Int()), MoveId: move, Version: m.Version()})
	if err != nil {
		t.Fatal(err)
	}
	last, fence := replayChanges(ctx, t, a, b, s, move, last, true)
	if fence != fr.FenceSeq || last != fr.FenceSeq {
		t.Fatalf("drain ended at %d with fence %d; Fence said %d", last, fence, fr.FenceSeq)
	}
	wg.Wait()
	for w := range writers {
		if writerErr[w] != nil {
			t.Fatalf("writer %d: %v", w, writerErr[w])
		}
		if writes[w] < 20 {
			t.Fatalf("writer %d made only %d writes during the move", w, writes[w])
		}
	}

	ca, cb := checksum(ctx, t, a, s), checksum(ctx, t, b, s)
	if ca.Keys == 0 || !bytes.Equal(ca.Sha256, cb.Sha256) || ca.Keys != cb.Keys || ca.Bytes != cb.Bytes {
		t.Fatalf("checksums differ: source %d keys %d bytes %x, target %d keys %d bytes %x", ca.Keys, ca.Bytes, ca.Sha256, cb.Keys, cb.Bytes, cb.Sha256)
	}
	if cs := checksum(ctx, t, b, otherSlot); cs.Keys != 0 {
		t.Fatalf("another slot leaked to the target: %d keys", cs.Keys)
	}

	// Commit: the directory now says b owns the slot.
	m.Set("b", b.addr, s)
	ack.verify(ctx, t, b.kv, s)
	_, err = a.kv.Get(ctx, &kvpb.GetRequest{Key: keys[0]})
	rd, ok := redirect.FromError(err)
	if !ok || rd.Kind != redirect.Moved || rd.Addr != b.addr || rd.Owner != "b" || rd.Version != m.Version() || rd.Slot != s {
		t.Fatalf("source after commit: got %v (%+v), want MOVED to b at %s version %d", err, rd, b.addr, m.Version())
	}
	// Writes continue on the target, versions intact.
	for i, k := range keys[:20] {
		if err := ack.write(ctx, t, b.kv, k, r, i); err != nil {
			t.Fatal(err)
		}
	}

	// Hand-off done: the source drops its copy in the background.
	if _, err := a.store.EndCapture(ctx, &slotdv1.EndCaptureRequest{Slot: uint32(s.Int()), MoveId: move}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.DropSlot(ctx, &slotdv1.DropSlotRequest{Slot: uint32(s.Int()), Version: m.Version() + 1, MoveId: move}); status.Code(err) != codes.Unavailable {
		t.Fatalf("drop at a version the node has not seen: %v, want Unavailable", err)
	}
	if _, err := b.store.DropSlot(ctx, &slotdv1.DropSlotRequest{Slot: uint32(s.Int()), Version: m.Version()}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("drop on the owner: %v, want FailedPrecondition", err)
	}
	otherBefore := checksum(ctx, t, a, otherSlot)
	dr, err := a.store.DropSlot(ctx, &slotdv1.DropSlotRequest{Slot: uint32(s.Int()), Version: m.Version(), MoveId: move})
	if err != nil || !dr.Started {
		t.Fatalf("drop: %v %v", dr, err)
	}
	eventually(t, "source drop", func() bool {
		st, err := a.store.SlotStats(ctx, &slotdv1.SlotStatsRequest{Slots: []uint32{uint32(s.Int())}})
		return err == nil && st.Slots[0].Keys == 0 && !st.Slots[0].Dropping && !st.Slots[0].Fenced
	})
	if cs := checksum(ctx, t, a, otherSlot); cs.Keys == 0 || !bytes.Equal(cs.Sha256, otherBefore.Sha256) {
		t.Fatalf("drop touched another slot: %d keys left of %d", cs.Keys, otherBefore.Keys)
	}
}

// TestImportTwice imports the same batches twice, both as a retry of one move
// (skipped by batch sequence) and as a fresh move (applied again): the
// target's checksum does not change.
func TestImportTwice(t *testing.T) {
	ctx := ctxT(t)
	m := new(node.StaticMap)
	a := startNode(t, "a", t.TempDir(), m, nodeOpts{noSync: true})
	b := startNode(t, "b", t.TempDir(), m, nodeOpts{noSync: true})
	m.SetAll("a", a.addr)
	m.Set("b", b.addr)
	keys, s := keysIn("twice", 300)
	ack := newAcked()
	r := rand.New(rand.NewPCG(5, 6))
	for i, k := range keys {
		if err := ack.write(ctx, t, a.kv, k, r, i); err != nil {
			t.Fatal(err)
		}
	}
	batches := exportAll(ctx, t, a, s, "m1", nil, 2<<10)
	if dups := importBatches(ctx, t, b, s, "m1", batches, 1); dups != 0 {
		t.Fatalf("first import reported %d duplicates", dups)
	}
	want := checksum(ctx, t, a, s)
	for _, tc := range []struct {
		name     string
		move     string
		wantDups int
	}{
		{"same move, retried", "m1", len(batches)},
		{"new move, applied again", "m2", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if dups := importBatches(ctx, t, b, s, tc.move, batches, 1); dups != tc.wantDups {
				t.Fatalf("duplicates %d, want %d", dups, tc.wantDups)
			}
			if got := checksum(ctx, t, b, s); !bytes.Equal(got.Sha256, want.Sha256) || got.Keys != want.Keys {
				t.Fatalf("target %d keys %x, source %d keys %x", got.Keys, got.Sha256, want.Keys, want.Sha256)
			}
		})
	}
	// Out-of-order imports change nothing and say why.
	_, err := b.store.Import(ctx, &slotdv1.ImportRequest{Slot: uint32(s.Int()), MoveId: "m2", Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: &slotdv1.SnapshotImport{BatchSeq: uint64(len(batches) + 2)}}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("gap in batches: %v, want FailedPrecondition", err)
	}
	_, err = b.store.Import(ctx, &slotdv1.ImportRequest{Slot: uint32(s.Int()), MoveId: "m2", Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: &slotdv1.SnapshotImport{
		BatchSeq: uint64(len(batches) + 1), Entries: []*slotdv1.Entry{{Key: []byte("not-in-the-slot"), Value: EncodeValue(1, nil)}},
	}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("key of another slot: %v, want InvalidArgument", err)
	}
	if got := checksum(ctx, t, b, s); !bytes.Equal(got.Sha256, want.Sha256) {
		t.Fatal("a refused import changed the target")
	}
}

// TestExportResumesAfterSourceRestart exports part of a slot, restarts the
// source and the target (writes before and after), resumes from the cursor
// the target reports and catches up:
// the target equals the source, no key came twice and none was skipped.
func TestExportResumesAfterSourceRestart(t *testing.T) {
	ctx := ctxT(t)
	m := new(node.StaticMap)
	a := startNode(t, "a", t.TempDir(), m, nodeOpts{})
	b := startNode(t, "b", t.TempDir(), m, nodeOpts{})
	m.SetAll("a", a.addr)
	m.Set("b", b.addr)
	keys, s := keysIn("resume", 400)
	ack := newAcked()
	r := rand.New(rand.NewPCG(7, 8))
	for i, k := range keys {
		v := fmt.Appendf(nil, "initial-%d", i)
		resp, err := a.kv.Put(ctx, &kvpb.PutRequest{Key: k, Value: v})
		if err != nil {
			t.Fatal(err)
		}
		ack.put(k, v, resp.Version)
	}
	const move = "move-r"
	// Take the first few batches, as a mover that crashed (or whose source
	// did) would have.
	st, err := a.store.Export(ctx, &slotdv1.ExportRequest{Slot: uint32(s.Int()), MoveId: move, MaxBatchBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var first []*slotdv1.ExportBatch
	for range 3 {
		bt, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, bt)
	}
	importBatches(ctx, t, b, s, move, first, 1)
	// Writes before the restart, to keys on both sides of the cursor.
	for i := range 100 {
		if err := ack.write(ctx, t, a.kv, keys[r.IntN(len(keys))], r, i); err != nil {
			t.Fatal(err)
		}
	}
	// Both ends restart: the source keeps its capture, the target its
	// import progress.
	a = a.restart(nodeOpts{})
	b = b.restart(nodeOpts{})
	m.SetAll("a", a.addr)
	m.Set("b", b.addr)
	for i := range 100 {
		if err := ack.write(ctx, t, a.kv, keys[r.IntN(len(keys))], r, 100+i); err != nil {
			t.Fatal(err)
		}
	}
	// The target tells a restarted mover where to go on.
	is, err := b.store.ImportStatus(ctx, &slotdv1.ImportStatusRequest{Slot: uint32(s.Int()), MoveId: move})
	if err != nil {
		t.Fatal(err)
	}
	if is.LastBatchSeq != 3 || is.SnapshotDone {
		t.Fatalf("import status %+v, want 3 batches, snapshot not done", is)
	}
	rest := exportAll(ctx, t, a, s, move, is.Cursor, 2<<10)
	importBatches(ctx, t, b, s, move, rest, is.LastBatchSeq+1)

	seen := map[string]bool{}
	var prev []byte
	for _, bt := range append(first, rest...) {
		if bt.SnapshotSeq != first[0].SnapshotSeq {
			t.Fatalf("snapshot seq changed across the restart: %d then %d", first[0].SnapshotSeq, bt.SnapshotSeq)
		}
		for _, e := range bt.Entries {
			if seen[string(e.Key)] || bytes.Compare(e.Key, prev) <= 0 {
				t.Fatalf("key %s exported twice or out of order", e.Key)
			}
			seen[string(e.Key)] = true
			prev = e.Key
		}
	}
	last, _ := replayChanges(ctx, t, a, b, s, move, first[0].SnapshotSeq, false)
	fr, err := a.store.Fence(ctx, &slotdv1.FenceRequest{Slot: uint32(s.Int()), MoveId: move, Version: m.Version()})
	if err != nil {
		t.Fatal(err)
	}
	if last, _ = replayChanges(ctx, t, a, b, s, move, last, true); last != fr.FenceSeq {
		t.Fatalf("drained to %d, fence at %d", last, fr.FenceSeq)
	}
	ca, cb := checksum(ctx, t, a, s), checksum(ctx, t, b, s)
	if !bytes.Equal(ca.Sha256, cb.Sha256) || ca.Keys != cb.Keys {
		t.Fatalf("source %d keys %x, target %d keys %x", ca.Keys, ca.Sha256, cb.Keys, cb.Sha256)
	}
	m.Set("b", b.addr, s)
	ack.verify(ctx, t, b.kv, s)
}

// TestFenceSurvivesRestart: a fenced slot rejects writes with the retryable
// error (reads still work), stays fenced across a restart, and takes writes
// again after Unfence.
func TestFenceSurvivesRestart(t *testing.T) {
	ctx := ctxT(t)
	m := new(node.StaticMap)
	dir := t.TempDir()
	a := startNode(t, "a", dir, m, nodeOpts{})
	m.SetAll("a", a.addr)
	keys, s := keysIn("fenced", 3)
	if _, err := a.kv.Put(ctx, &kvpb.PutRequest{Key: keys[0], Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Fence(ctx, &slotdv1.FenceRequest{Slot: uint32(s.Int()), MoveId: "mv", Version: 7}); err != nil {
		t.Fatal(err)
	}
	check := func(tn *testNode) {
		t.Helper()
		for _, call := range []func() error{
			func() error { _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: keys[1], Value: []byte("x")}); return err },
			func() error { _, err := tn.kv.Delete(ctx, &kvpb.DeleteRequest{Key: keys[0]}); return err },
			func() error {
				_, err := tn.kv.CompareAndSet(ctx, &kvpb.CompareAndSetRequest{Key: keys[0], ExpectedVersion: 1, Value: []byte("y")})
				return err
			},
		} {
			err := call()
			f, ok := redirect.FencedFromError(err)
			if status.Code(err) != codes.Unavailable || !ok || f.Slot != s || f.Version != 7 || f.MoveID != "mv" {
				t.Fatalf("write to fenced slot: %v, want Unavailable with Fenced detail", err)
			}
			var retry bool
			for _, d := range status.Convert(err).Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok && ri.RetryDelay.AsDuration() > 0 {
					retry = true
				}
			}
			if !retry {
				t.Fatalf("fenced error carries no RetryInfo: %v", status.Convert(err).Details())
			}
		}
		got, err := tn.kv.Get(ctx, &kvpb.GetRequest{Key: keys[0]})
		if err != nil || string(got.Value) != "before" {
			t.Fatalf("read of fenced slot: %v %v", got, err)
		}
		// Other slots are not affected.
		if _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("elsewhere"), Value: []byte("ok")}); err != nil {
			t.Fatal(err)
		}
	}
	check(a)
	a = a.restart(nodeOpts{})
	m.SetAll("a", a.addr)
	check(a)
	if _, err := a.store.Unfence(ctx, &slotdv1.UnfenceRequest{Slot: uint32(s.Int()), MoveId: "other"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("unfence by another move: %v, want FailedPrecondition", err)
	}
	if _, err := a.store.Unfence(ctx, &slotdv1.UnfenceRequest{Slot: uint32(s.Int()), MoveId: "mv"}); err != nil {
		t.Fatal(err)
	}
	a = a.restart(nodeOpts{})
	m.SetAll("a", a.addr)
	if _, err := a.kv.Put(ctx, &kvpb.PutRequest{Key: keys[1], Value: []byte("after")}); err != nil {
		t.Fatalf("write after unfence and restart: %v", err)
	}
}

// TestMovedAnswer: a node asked about a slot it does not own answers MOVED
// with the owner's id, address and the map version, for reads and writes.
func TestMovedAnswer(t *testing.T) {
	ctx := ctxT(t)
	m := new(node.StaticMap)
	a := startNode(t, "a", t.TempDir(), m, nodeOpts{})
	keys, s := keysIn("elsewhere", 1)
	if _, err := a.kv.Get(ctx, &kvpb.GetRequest{Key: keys[0]}); status.Code(err) != codes.Unavailable {
		t.Fatalf("before any map: %v, want Unavailable", err)
	}
	m.SetAll("a", a.addr)
	m.Set("c", "127.0.0.1:7999", s)
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := a.kv.Get(ctx, &kvpb.GetRequest{Key: keys[0]}); return err },
		"put":    func() error { _, err := a.kv.Put(ctx, &kvpb.PutRequest{Key: keys[0]}); return err },
		"delete": func() error { _, err := a.kv.Delete(ctx, &kvpb.DeleteRequest{Key: keys[0]}); return err },
		"cas":    func() error { _, err := a.kv.CompareAndSet(ctx, &kvpb.CompareAndSetRequest{Key: keys[0]}); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := call()
			rd, ok := redirect.FromError(err)
			want := redirect.Redirect{Kind: redirect.Moved, Slot: s, Owner: "c", Addr: "127.0.0.1:7999", Version: m.Version()}
			if !ok || rd != want || status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("got %v (%+v), want %v", err, rd, want)
			}
			if msg := status.Convert(err).Message(); msg != want.String() {
				t.Fatalf("message %q, want the text form %q", msg, want.String())
			}
		})
	}
	// Import into a slot the node owns is refused: it would overwrite live
	// data. As retryable (Unavailable): the node's map may be behind the
	// directory, which began the move because it says otherwise.
	mine, ms := keysIn("mine", 1)
	_, err := a.store.Import(ctx, &slotdv1.ImportRequest{Slot: uint32(ms.Int()), MoveId: "x", Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: &slotdv1.SnapshotImport{
		BatchSeq: 1, Entries: []*slotdv1.Entry{{Key: mine[0], Value: EncodeValue(1, nil)}},
	}}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("import into an owned slot: %v, want Unavailable", err)
	}
	if v, gerr := a.srv.Engine().Get(mine[0]); gerr != nil || v != nil {
		t.Fatalf("the refused import wrote %q (%v)", v, gerr)
	}
}

// TestRateChangeAppliesToRunningExport starts an export at 2 KB/s (a 100 KB
// slot would take 50 s), lifts the limit while it runs, and sees it finish
// long before that: a running export picks up the new rate. The timing
// claim itself (within one second) is TestThrottleRateChange in node,
// on a simulated clock.
func TestRateChangeAppliesToRunningExport(t *testing.T) {
	ctx := ctxT(t)
	m := new(node.StaticMap)
	a := startNode(t, "a", t.TempDir(), m, nodeOpts{noSync: true, rate: 2000})
	m.SetAll("a", a.addr)
	keys, s := keysIn("slow", 100)
	batch := make([]node.Mutation, len(keys))
	for i, k := range keys {
		batch[i] = node.Mutation{Key: k, Value: EncodeValue(1, make([]byte, 1000))}
	}
	if err := a.srv.Engine().Apply(ctx, s, batch); err != nil {
		t.Fatal(err)
	}
	st, err := a.store.Export(ctx, &slotdv1.ExportRequest{Slot: uint32(s.Int()), MoveId: "slow", MaxBatchBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the export is running
		t.Fatal(err)
	}
	resp, err := a.store.SetExportRate(ctx, &slotdv1.SetExportRateRequest{BytesPerSecond: 0})
	if err != nil || resp.BytesPerSecond != 0 {
		t.Fatalf("set rate: %v %v", resp, err)
	}
	start := time.Now()
	for {
		b, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if b.Done {
			break
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("export took %s after the limit was lifted; at 2 KB/s it would take 50s", d)
	}
}

// moveSlot copies slot s from src to dst the way the mover does, up to and
// including the fence and the drain; the caller commits.
func moveSlot(ctx context.Context, t *testing.T, src, dst *testNode, s slots.Slot, moveID string, version uint64) {
	t.Helper()
	batches := exportAll(ctx, t, src, s, moveID, nil, 8<<10)
	importBatches(ctx, t, dst, s, moveID, batches, 1)
	last, _ := replayChanges(ctx, t, src, dst, s, moveID, batches[0].SnapshotSeq, false)
	if _, err := src.store.Fence(ctx, &slotdv1.FenceRequest{Slot: uint32(s.Int()), MoveId: moveID, Version: version}); err != nil {
		t.Fatal(err)
	}
	replayChanges(ctx, t, src, dst, s, moveID, last, true)
	if _, err := src.store.EndCapture(ctx, &slotdv1.EndCaptureRequest{Slot: uint32(s.Int()), MoveId: moveID}); err != nil {
		t.Fatal(err)
	}
}

// TestMoveThereAndBack moves a slot from a to b and back to a without
// dropping a's old copy in between: the import lifts a's stale fence, and
// once the directory names a again, a takes writes.
func TestMoveThereAndBack(t *testing.T) {
	ctx := ctxT(t)
	m := new(node.StaticMap)
	a := startNode(t, "a", t.TempDir(), m, nodeOpts{noSync: true})
	b := startNode(t, "b", t.TempDir(), m, nodeOpts{noSync: true})
	m.SetAll("a", a.addr)
	m.Set("b", b.addr)
	keys, s := keysIn("roundtrip", 50)
	ack := newAcked()
	r := rand.New(rand.NewPCG(9, 10))
	for i, k := range keys {
		if err := ack.write(ctx, t, a.kv, k, r, i); err != nil {
			t.Fatal(err)
		}
	}
	moveSlot(ctx, t, a, b, s, "there", m.Version())
	m.Set("b", b.addr, s)
	for i, k := range keys[:10] {
		if err := ack.write(ctx, t, b.kv, k, r, i); err != nil {
			t.Fatal(err)
		}
	}
	moveSlot(ctx, t, b, a, s, "back", m.Version())
	if st, err := a.store.SlotStats(ctx, &slotdv1.SlotStatsRequest{Slots: []uint32{uint32(s.Int())}}); err != nil || st.Slots[0].Fenced {
		t.Fatalf("a still fenced after importing the slot back: %v %v", st, err)
	}
	m.Set("a", a.addr, s)
	for i, k := range keys[10:20] {
		if err := ack.write(ctx, t, a.kv, k, r, i); err != nil {
			t.Fatalf("write on a after the move back: %v", err)
		}
	}
	ack.verify(ctx, t, a.kv, s)
	// b handed the slot back and is fenced: a write there that slipped past
	// a stale map would be refused, and with the current map it is MOVED.
	if _, err := b.kv.Put(ctx, &kvpb.PutRequest{Key: keys[0]}); !errorsIsMoved(err, a.addr) {
		t.Fatalf("b after the move back: %v, want MOVED to a", err)
	}
}

func errorsIsMoved(err error, addr string) bool {
	rd, ok := redirect.FromError(err)
	return ok && rd.Kind == redirect.Moved && rd.Addr == addr
}

// TestBadRequests: bad input gets InvalidArgument and changes nothing.
func TestBadRequests(t *testing.T) {
	ctx := ctxT(t)
	m := new(node.StaticMap)
	a := startNode(t, "a", t.TempDir(), m, nodeOpts{noSync: true})
	m.SetAll("a", a.addr)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"empty key get", func() error { _, err := a.kv.Get(ctx, &kvpb.GetRequest{}); return err }},
		{"empty key put", func() error { _, err := a.kv.Put(ctx, &kvpb.PutRequest{Value: []byte("v")}); return err }},
		{"huge key", func() error {
			_, err := a.kv.Put(ctx, &kvpb.PutRequest{Key: make([]byte, MaxKeyBytes+1)})
			return err
		}},
		{"huge value", func() error {
			_, err := a.kv.CompareAndSet(ctx, &kvpb.CompareAndSetRequest{Key: []byte("k"), Value: make([]byte, MaxValueBytes+1)})
			return err
		}},
		{"slot out of range", func() error {
			_, err := a.store.Fence(ctx, &slotdv1.FenceRequest{Slot: slots.Count})
			return err
		}},
		{"import without a batch", func() error {
			_, err := a.store.Import(ctx, &slotdv1.ImportRequest{Slot: 1})
			return err
		}},
		{"change without an op", func() error {
			_, err := a.store.Import(ctx, &slotdv1.ImportRequest{Slot: 1, Batch: &slotdv1.ImportRequest_Changes{Changes: &slotdv1.ChangeImport{Changes: []*slotdv1.Change{{Seq: 1, Key: []byte("k")}}}}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
		})
	}
	st, err := a.store.SlotStats(ctx, &slotdv1.SlotStatsRequest{})
	if err != nil || len(st.Slots) != 0 {
		t.Fatalf("bad requests left state behind: %v %v", st, err)
	}
}

// TestExportRequestRate: an Export's rate field sets the node's one token
// bucket: 0 leaves it, a rate sets it, RateUnlimited lifts it. A mover
// whose throttle an operator lifted while this donor was idle sends
// RateUnlimited with the donor's next export; with 0 the donor kept its
// last limit for good.
func TestExportRequestRate(t *testing.T) {
	ctx := ctxT(t)
	m := new(node.StaticMap)
	a := startNode(t, "a", t.TempDir(), m, nodeOpts{noSync: true, rate: 1 << 20})
	m.SetAll("a", a.addr)
	_, s := keysIn("rate", 1)
	for i, tc := range []struct {
		send uint64
		want int64
	}{
		{send: 0, want: 1 << 20},
		{send: 5 << 20, want: 5 << 20},
		{send: 0, want: 5 << 20},
		{send: slotdv1.RateUnlimited, want: 0},
		{send: 0, want: 0},
		{send: 2 << 20, want: 2 << 20},
	} {
		exportAllAt(ctx, t, a, s, fmt.Sprintf("rate-%d", i), tc.send)
		if got := a.srv.Node().ExportRate(); got != tc.want {
			t.Fatalf("step %d: export with rate %d: node rate %d, want %d", i, tc.send, got, tc.want)
		}
	}
}

// exportAllAt reads one export of slot s to its end, asking for rate.
func exportAllAt(ctx context.Context, t *testing.T, src *testNode, s slots.Slot, moveID string, rate uint64) {
	t.Helper()
	st, err := src.store.Export(ctx, &slotdv1.ExportRequest{Slot: uint32(s.Int()), MoveId: moveID, RateBytesPerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := st.Recv()
		if err != nil {
			t.Fatalf("export %s: %v", moveID, err)
		}
		if b.GetDone() {
			break
		}
	}
	if _, err := src.store.EndCapture(ctx, &slotdv1.EndCaptureRequest{Slot: uint32(s.Int()), MoveId: moveID}); err != nil {
		t.Fatalf("end capture %s: %v", moveID, err)
	}
}
