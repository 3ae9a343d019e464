package mover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/slots"
)

// rawOf is b encoded (plus extra bytes appended), as the relay receives it.
func rawOf(t *testing.T, b *slotdv1.ExportBatch, extra []byte) *rawBatch {
	t.Helper()
	data, err := proto.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return &rawBatch{buf: mem.SliceBuffer(append(data, extra...))}
}

// TestRelayImportIsTheDecodedImport: the import the relay builds from raw
// export batches decodes to exactly the SnapshotImport the decoded path
// sends: the entries of every batch in order, the last batch's cursor,
// snapshot sequence and done flag, and the mover's batch number.
func TestRelayImportIsTheDecodedImport(t *testing.T) {
	keys := keysInSlots(map[int]bool{77: true}, 6)
	entries := func(from, to int) []*slotdv1.Entry {
		var es []*slotdv1.Entry
		for _, k := range keys[from:to] {
			es = append(es, &slotdv1.Entry{Key: k, Value: []byte("value of " + string(k))})
		}
		return es
	}
	// An unknown field (number 99) a newer source might add: skipped, not
	// forwarded.
	unknown := protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "later")
	cases := []struct {
		name    string
		batches []*slotdv1.ExportBatch
		extra   []byte
		slot    uint32
		seq     uint64
		after   bool // sent before the previous import's answer
	}{
		{"one batch", []*slotdv1.ExportBatch{{Slot: 77, Entries: entries(0, 3), Cursor: []byte{1, 'k'}, SnapshotSeq: 9}}, nil, 77, 1, false},
		{"last batch, done", []*slotdv1.ExportBatch{{Slot: 77, Entries: entries(0, 2), Cursor: []byte{1, 'z'}, SnapshotSeq: 9, Done: true}}, nil, 77, 12, false},
		{"empty slot", []*slotdv1.ExportBatch{{Slot: 77, Cursor: []byte{1}, Done: true}}, nil, 77, 1, false},
		{"three merged", []*slotdv1.ExportBatch{
			{Slot: 77, Entries: entries(0, 2), Cursor: []byte{1, 'a'}, SnapshotSeq: 4},
			{Slot: 77, Entries: entries(2, 4), Cursor: []byte{1, 'b'}, SnapshotSeq: 4},
			{Slot: 77, Entries: entries(4, 6), Cursor: []byte{1, 'c'}, SnapshotSeq: 4, Done: true},
		}, nil, 77, 300, false},
		{"unknown field skipped", []*slotdv1.ExportBatch{{Slot: 77, Entries: entries(0, 1), Cursor: []byte{1}}}, unknown, 77, 2, false},
		{"slot 0", []*slotdv1.ExportBatch{{Entries: []*slotdv1.Entry{{Key: keysInSlots(map[int]bool{0: true}, 1)[0], Value: []byte("v")}}, Cursor: []byte{1}}}, nil, 0, 1, false},
		{"sent ahead", []*slotdv1.ExportBatch{{Slot: 77, Entries: entries(0, 2), Cursor: []byte{1, 'd'}, SnapshotSeq: 3}}, nil, 77, 5, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			imp := &relayImport{slot: tc.slot, moveID: "m-1", batchSeq: tc.seq, afterPrevious: tc.after}
			want := &slotdv1.SnapshotImport{BatchSeq: tc.seq, AfterPrevious: tc.after}
			wantBytes, wantKeys := 0, 0
			for _, b := range tc.batches {
				raw := rawOf(t, b, tc.extra)
				if err := raw.scan(slots.MustNew(int(tc.slot))); err != nil {
					t.Fatal(err)
				}
				imp.batches = append(imp.batches, raw)
				want.Entries = append(want.Entries, b.Entries...)
				want.Cursor, want.SnapshotSeq, want.Done = b.Cursor, b.SnapshotSeq, b.Done
				wantBytes += entryBytes(b.Entries)
				wantKeys += len(b.Entries)
				if raw.bytes != entryBytes(b.Entries) || raw.keys != len(b.Entries) {
					t.Errorf("scan counted %d keys %d bytes, want %d, %d", raw.keys, raw.bytes, len(b.Entries), entryBytes(b.Entries))
				}
			}
			out := imp.encode()
			if n := imp.encodedLen(); n != out.Len() {
				t.Errorf("encodedLen %d, encoded %d bytes", n, out.Len())
			}
			got := &slotdv1.ImportRequest{}
			if err := proto.Unmarshal(out.Materialize(), got); err != nil {
				t.Fatal(err)
			}
			out.Free()
			wantReq := &slotdv1.ImportRequest{Slot: tc.slot, MoveId: "m-1", Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: want}}
			if !proto.Equal(got, wantReq) {
				t.Errorf("relayed import decodes to\n%v\nwant\n%v", got, wantReq)
			}
			if len(got.ProtoReflect().GetUnknown()) != 0 || len(got.GetSnapshot().ProtoReflect().GetUnknown()) != 0 {
				t.Errorf("relayed import carries unknown fields")
			}
		})
	}
}

// TestRelayScanRefuses: a batch with a key of another slot, or bytes no
// encoder writes, is a store that lies; the scan says which.
func TestRelayScanRefuses(t *testing.T) {
	s := slots.MustNew(77)
	good := keysInSlots(map[int]bool{77: true}, 2)
	foreign := []byte("{planted}:key")
	valid, _ := proto.Marshal(&slotdv1.ExportBatch{Slot: 77, Entries: []*slotdv1.Entry{{Key: good[0], Value: []byte("v")}}})
	split := append(append(append([]byte{}, valid...), protowire.AppendVarint(protowire.AppendTag(nil, 4, protowire.VarintType), 3)...), valid[2:]...)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"key of another slot", mustMarshal(t, &slotdv1.ExportBatch{Entries: []*slotdv1.Entry{{Key: good[0]}, {Key: foreign, Value: []byte("evil")}}}),
			fmt.Sprintf("export of slot 77 carried key %q of slot %d", foreign, slots.ForKey(foreign).Int())},
		{"empty key", mustMarshal(t, &slotdv1.ExportBatch{Entries: []*slotdv1.Entry{{Value: []byte("v")}}}), "export of slot 77 carried key"},
		{"truncated", valid[:len(valid)-1], "malformed"},
		{"bad tag", []byte{0x80}, "malformed"},
		{"entries split by another field", split, "entries not contiguous"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &rawBatch{buf: mem.SliceBuffer(tc.data)}
			err := b.scan(s)
			if !errors.Is(err, ErrStoreLied) {
				t.Fatalf("scan: %v, want ErrStoreLied", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("scan: %q does not say %q", err, tc.want)
			}
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// importRecorder is a target's Store client that notes the batch number
// of every snapshot import and whether it was sent ahead of its
// predecessor's answer. As an old target (the version before
// after_previous) it never says waits_for_previous and refuses a batch
// sent ahead. As a new one it holds batch 2 until batch 3 has arrived, so
// that batch 3 can only have been sent ahead.
type importRecorder struct {
	slotdv1.StoreClient
	old   bool
	third chan struct{} // closed when batch 3 arrives
	once  sync.Once

	mu    sync.Mutex
	ahead []uint64 // batch numbers sent with after_previous
	held  bool     // batch 2 was released by batch 3's arrival
}

func (r *importRecorder) Import(ctx context.Context, in *slotdv1.ImportRequest, opts ...grpc.CallOption) (*slotdv1.ImportResponse, error) {
	if sn := in.GetSnapshot(); sn != nil {
		r.mu.Lock()
		if sn.GetAfterPrevious() {
			r.ahead = append(r.ahead, sn.GetBatchSeq())
		}
		r.mu.Unlock()
		switch {
		case r.old && sn.GetAfterPrevious():
			return nil, status.Error(codes.FailedPrecondition, "an old target refuses a gap")
		case !r.old && sn.GetBatchSeq() == 3:
			r.once.Do(func() { close(r.third) })
		case !r.old && sn.GetBatchSeq() == 2:
			select {
			case <-r.third:
				r.mu.Lock()
				r.held = true
				r.mu.Unlock()
			case <-time.After(30 * time.Second): // fails below
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	resp, err := r.StoreClient.Import(ctx, in, opts...)
	if r.old && resp != nil {
		resp.WaitsForPrevious = false
	}
	return resp, err
}

// TestRelayPipelinesOnlyWhenTargetWaits: once the target has said it
// lets a batch sent ahead wait for its predecessor, the relay keeps two
// imports in flight (batch 3 is sent while batch 2 is unanswered) and the
// copy is still complete and in order (the transfer's checksums agree
// after the drain); a target that never said so gets one import at a
// time, as before the flag.
func TestRelayPipelinesOnlyWhenTargetWaits(t *testing.T) {
	c := newCluster(t, 2)
	c.addNode("n3")
	for i, old := range []bool{false, true} {
		name := "new target"
		if old {
			name = "old target"
		}
		t.Run(name, func(t *testing.T) {
			snap, err := c.dir.Snapshot(c.ctx)
			if err != nil {
				t.Fatal(err)
			}
			slot := slots.MustNew(0)
			for s := 100 + i*300; s < slots.Count; s++ {
				if snap.Owner(slots.MustNew(s)) == "n1" {
					slot = slots.MustNew(s)
					break
				}
			}
			keys := keysInSlots(map[int]bool{slot.Int(): true}, 2000)
			for _, k := range keys {
				if err := c.put(c.ctx, k, bytes.Repeat([]byte("v"), 256)); err != nil {
					t.Fatal(err)
				}
			}
			srcReal, _ := c.pool.client(c.nodes["n1"].addr)
			dstReal, _ := c.pool.client(c.nodes["n3"].addr)
			rec := &importRecorder{StoreClient: dstReal, old: old, third: make(chan struct{})}
			srcC := storeAt(t, c, serveLies(t, &lyingStore{StoreClient: srcReal}))
			dstC := storeAt(t, c, serveLies(t, &lyingStore{StoreClient: rec}))
			mv, err := c.dir.BeginMove(c.ctx, directory.MoveSpec{Slot: slot, From: "n1", To: "n3", MoveID: fmt.Sprintf("pipelined-%d", i), By: "test"})
			if err != nil {
				t.Fatal(err)
			}
			tr := &slotTransfer{
				Slot: slot, MoveID: mv.MoveID, Source: srcC, Target: dstC, MaxBatchBytes: 8 << 10,
				Journal: &failJournal{dir: c.dir, mv: mv}, Verify: true, Fresh: true,
			}
			res, err := tr.Run(c.ctx, stepCopy)
			if err != nil {
				t.Fatalf("transfer: %v", err)
			}
			if res.Keys != int64(len(keys)) {
				t.Errorf("copied %d keys, want %d", res.Keys, len(keys))
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			switch {
			case old && len(rec.ahead) > 0:
				t.Errorf("batches %v sent ahead to a target that never said it waits", rec.ahead)
			case !old && (!rec.held || !slices.Contains(rec.ahead, 3)):
				t.Errorf("batch 3 not sent while batch 2 was unanswered (sent ahead: %v)", rec.ahead)
			}
		})
	}
}

// BenchmarkRelayScan: the relay's walk of one export batch of about 1 MiB
// (1,000 entries of 1 KiB values), which hashes every key to check its slot.
func BenchmarkRelayScan(b *testing.B) {
	keys := keysInSlots(map[int]bool{77: true}, 1000)
	batch := &slotdv1.ExportBatch{Slot: 77, Cursor: []byte{1, 'k'}, SnapshotSeq: 9}
	for _, k := range keys {
		batch.Entries = append(batch.Entries, &slotdv1.Entry{Key: k, Value: bytes.Repeat([]byte{'v'}, 1024)})
	}
	data, err := proto.Marshal(batch)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		raw := &rawBatch{buf: mem.SliceBuffer(data)}
		if err := raw.scan(slots.MustNew(77)); err != nil || raw.keys != len(keys) {
			b.Fatalf("scan: %d keys, %v", raw.keys, err)
		}
	}
}
