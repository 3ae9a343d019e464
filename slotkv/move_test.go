package slotkv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

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
