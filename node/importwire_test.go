package node

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
)

// checkImportWire decodes b through the store codec and through
// proto.Unmarshal and fails unless they agree: the same error or none, and
// the same request, whichever path the codec took. It reports whether the
// codec read b in place.
func checkImportWire(t *testing.T, b []byte) (fast bool) {
	t.Helper()
	var want slotdv1.ImportRequest
	wantErr := proto.Unmarshal(b, &want)
	codec := storeCodec{encoding.GetCodecV2(protoenc.Name)}
	r := new(importRequest)
	err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, r)
	defer r.free()
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("codec error %v, proto error %v (input %x)", err, wantErr, b)
	}
	if err != nil {
		return false
	}
	if !r.fast {
		if !proto.Equal(&r.ImportRequest, &want) {
			t.Fatalf("fallback decoded %v, proto %v", &r.ImportRequest, &want)
		}
		return false
	}
	snap := want.GetSnapshot()
	if snap == nil {
		t.Fatalf("read in place, but proto finds no snapshot batch in %v", &want)
	}
	if r.slot != want.GetSlot() || r.moveID != want.GetMoveId() {
		t.Fatalf("slot %d move %q, proto %d %q", r.slot, r.moveID, want.GetSlot(), want.GetMoveId())
	}
	sb := r.batch
	if sb.BatchSeq != snap.GetBatchSeq() || !bytes.Equal(sb.Cursor, snap.GetCursor()) || sb.SnapshotSeq != snap.GetSnapshotSeq() ||
		sb.Done != snap.GetDone() || sb.AfterPrevious != snap.GetAfterPrevious() {
		t.Fatalf("batch %+v, proto %v", sb, snap)
	}
	if len(sb.Entries) != len(snap.GetEntries()) {
		t.Fatalf("%d entries, proto %d", len(sb.Entries), len(snap.GetEntries()))
	}
	for i, e := range snap.GetEntries() {
		if !bytes.Equal(sb.Entries[i].Key, e.GetKey()) || !bytes.Equal(sb.Entries[i].Value, e.GetValue()) {
			t.Fatalf("entry %d: %q=%q, proto %q=%q", i, sb.Entries[i].Key, sb.Entries[i].Value, e.GetKey(), e.GetValue())
		}
	}
	return true
}

func mustMarshalImport(t testing.TB, r *slotdv1.ImportRequest) []byte {
	t.Helper()
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func snapshotImport(entries int) *slotdv1.ImportRequest {
	snap := &slotdv1.SnapshotImport{BatchSeq: 3, Cursor: []byte("k0007"), SnapshotSeq: 41, Done: true, AfterPrevious: true}
	for i := range entries {
		snap.Entries = append(snap.Entries, &slotdv1.Entry{Key: []byte{'k', byte('0' + i)}, Value: bytes.Repeat([]byte{byte(i)}, 9+i)})
	}
	return &slotdv1.ImportRequest{Slot: 1234, MoveId: "mv-1", Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: snap}}
}

func TestImportWire(t *testing.T) {
	batch := mustMarshalImport(t, snapshotImport(3))
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	for _, tc := range []struct {
		name string
		b    []byte
		fast bool
	}{
		{"snapshot batch", batch, true},
		{"snapshot batch without entries", mustMarshalImport(t, snapshotImport(0)), true},
		{"empty snapshot message", mustMarshalImport(t, &slotdv1.ImportRequest{Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: &slotdv1.SnapshotImport{}}}), true},
		{"entry with an empty value", mustMarshalImport(t, &slotdv1.ImportRequest{Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: &slotdv1.SnapshotImport{
			Entries: []*slotdv1.Entry{{Key: []byte("k")}}}}}), true},
		{"changes", mustMarshalImport(t, &slotdv1.ImportRequest{Slot: 1, Batch: &slotdv1.ImportRequest_Changes{Changes: &slotdv1.ChangeImport{
			Changes: []*slotdv1.Change{{Seq: 1, Op: slotdv1.ChangeOp_CHANGE_OP_PUT, Key: []byte("k"), Value: []byte("v")}}}}}), false},
		{"no batch", mustMarshalImport(t, &slotdv1.ImportRequest{Slot: 1, MoveId: "m"}), false},
		{"unknown field", append(protowire.AppendVarint(tag(9, protowire.VarintType), 1), batch...), false},
		{"slot twice (proto takes the last)", append(protowire.AppendVarint(tag(reqSlot, protowire.VarintType), 7), batch...), false},
		{"two snapshot fields (proto merges them)", append(append([]byte(nil), batch...), batch...), false},
		{"move id not UTF-8", append(protowire.AppendBytes(tag(reqMoveID, protowire.BytesType), []byte{0xff}), batch...), false},
		{"slot as bytes", append(protowire.AppendBytes(tag(reqSlot, protowire.BytesType), nil), batch...), false},
		{"truncated", batch[:len(batch)-3], false},
		{"fixed64 field", append(protowire.AppendFixed64(tag(reqSlot, protowire.Fixed64Type), 1), batch...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkImportWire(t, tc.b); got != tc.fast {
				t.Errorf("read in place %v, want %v", got, tc.fast)
			}
		})
	}
}

// TestImportWireAliases: entries read in place point into the received
// buffer, with no room to append into the next one, and the cursor kept in
// the import state is a copy.
func TestImportWireAliases(t *testing.T) {
	b := mustMarshalImport(t, snapshotImport(2))
	r := new(importRequest)
	if !r.parse(b) {
		t.Fatal("snapshot batch not read in place")
	}
	e := r.batch.Entries[0]
	if cap(e.Key) != len(e.Key) || cap(e.Value) != len(e.Value) {
		t.Errorf("key cap %d len %d, value cap %d len %d: an append would overwrite the next field", cap(e.Key), len(e.Key), cap(e.Value), len(e.Value))
	}
	at := bytes.Index(b, e.Value)
	b[at] ^= 0xff
	if e.Value[0] != b[at] {
		t.Error("entry value is a copy, not a view of the request")
	}
	cur := bytes.Index(b, []byte("k0007"))
	b[cur] = 'x'
	if string(r.batch.Cursor) != "k0007" {
		t.Errorf("cursor %q changed with the request buffer", r.batch.Cursor)
	}
}

func FuzzImportWire(f *testing.F) {
	f.Add(mustMarshalImport(f, snapshotImport(3)))
	f.Add(mustMarshalImport(f, snapshotImport(0)))
	f.Add(mustMarshalImport(f, &slotdv1.ImportRequest{Slot: 2, Batch: &slotdv1.ImportRequest_Changes{Changes: &slotdv1.ChangeImport{
		Changes: []*slotdv1.Change{{Seq: 1, Op: slotdv1.ChangeOp_CHANGE_OP_DELETE, Key: []byte("k")}}}}}))
	f.Fuzz(func(t *testing.T, b []byte) { checkImportWire(t, b) })
}

// BenchmarkImportDecode decodes a 4 MiB import of 4,000 entries of 1 KiB
// (what the mover sends a durable target) through the store codec and
// through the proto codec.
func BenchmarkImportDecode(b *testing.B) {
	snap := &slotdv1.SnapshotImport{BatchSeq: 1, Cursor: []byte("k")}
	for i := range 4000 {
		snap.Entries = append(snap.Entries, &slotdv1.Entry{Key: []byte{'k', byte(i >> 8), byte(i)}, Value: make([]byte, 1032)})
	}
	buf := mustMarshalImport(b, &slotdv1.ImportRequest{Slot: 1, MoveId: "mv", Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: snap}})
	for _, tc := range []struct {
		name  string
		codec encoding.CodecV2
		msg   func() any
	}{
		{"store", storeCodec{encoding.GetCodecV2(protoenc.Name)}, func() any { return new(importRequest) }},
		{"proto", encoding.GetCodecV2(protoenc.Name), func() any { return new(slotdv1.ImportRequest) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				m := tc.msg()
				if err := tc.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(buf)}, m); err != nil {
					b.Fatal(err)
				}
				if r, ok := m.(*importRequest); ok {
					r.free()
				}
			}
		})
	}
}
