package mover

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
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
	}{
		{"one batch", []*slotdv1.ExportBatch{{Slot: 77, Entries: entries(0, 3), Cursor: []byte{1, 'k'}, SnapshotSeq: 9}}, nil, 77, 1},
		{"last batch, done", []*slotdv1.ExportBatch{{Slot: 77, Entries: entries(0, 2), Cursor: []byte{1, 'z'}, SnapshotSeq: 9, Done: true}}, nil, 77, 12},
		{"empty slot", []*slotdv1.ExportBatch{{Slot: 77, Cursor: []byte{1}, Done: true}}, nil, 77, 1},
		{"three merged", []*slotdv1.ExportBatch{
			{Slot: 77, Entries: entries(0, 2), Cursor: []byte{1, 'a'}, SnapshotSeq: 4},
			{Slot: 77, Entries: entries(2, 4), Cursor: []byte{1, 'b'}, SnapshotSeq: 4},
			{Slot: 77, Entries: entries(4, 6), Cursor: []byte{1, 'c'}, SnapshotSeq: 4, Done: true},
		}, nil, 77, 300},
		{"unknown field skipped", []*slotdv1.ExportBatch{{Slot: 77, Entries: entries(0, 1), Cursor: []byte{1}}}, unknown, 77, 2},
		{"slot 0", []*slotdv1.ExportBatch{{Entries: []*slotdv1.Entry{{Key: keysInSlots(map[int]bool{0: true}, 1)[0], Value: []byte("v")}}, Cursor: []byte{1}}}, nil, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			imp := &relayImport{slot: tc.slot, moveID: "m-1", batchSeq: tc.seq}
			want := &slotdv1.SnapshotImport{BatchSeq: tc.seq}
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
