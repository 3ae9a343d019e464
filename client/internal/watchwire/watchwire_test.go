package watchwire

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
)

func delta(d *slotdv1.MapDelta) *slotdv1.WatchMapResponse {
	return &slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Delta{Delta: d}}
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// check decodes b with d and with proto.Unmarshal and fails unless both
// give the same message, or both fail. It reports whether the fast path
// decoded b.
func check(t testing.TB, d *Decoder, b []byte) (fast bool) {
	t.Helper()
	want := new(slotdv1.WatchMapResponse)
	werr := proto.Unmarshal(b, want)
	_, fast = d.decodeFast(b)
	got, gerr := d.Decode(b)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("% x: proto.Unmarshal: %v, Decode: %v", b, werr, gerr)
	}
	if werr == nil && !proto.Equal(got, want) {
		t.Fatalf("% x: Decode = %v, want %v", b, got, want)
	}
	return fast
}

func TestDecode(t *testing.T) {
	mig := &slotdv1.Migration{Slot: 1000, From: "n1", To: "n2", Phase: slotdv1.MovePhase_MOVE_PHASE_FENCED, MoveId: "m-1"}
	tests := []struct {
		name string
		b    []byte
		fast bool // whether the fast path takes it
	}{
		{"commit: one slot, no move in flight",
			mustMarshal(t, delta(&slotdv1.MapDelta{FromVersion: 7, Version: 8, Slots: []*slotdv1.SlotOwner{{Slot: 1000, Owner: "n2"}}})), true},
		{"begin: a move in flight, no slot",
			mustMarshal(t, delta(&slotdv1.MapDelta{FromVersion: 8, Version: 9, Migrations: []*slotdv1.Migration{mig}})), true},
		{"many slots and moves",
			mustMarshal(t, delta(&slotdv1.MapDelta{FromVersion: 1, Version: 90, Slots: []*slotdv1.SlotOwner{{Slot: 0, Owner: "n1"}, {Slot: 16383, Owner: "n3"}, {Slot: 5, Owner: ""}},
				Migrations: []*slotdv1.Migration{mig, {Slot: 2}}})), true},
		{"empty delta", mustMarshal(t, delta(&slotdv1.MapDelta{})), true},
		{"node changes go to proto",
			mustMarshal(t, delta(&slotdv1.MapDelta{FromVersion: 1, Version: 2, Nodes: []*slotdv1.Node{{Id: "n4", Address: "127.0.0.1:1"}}, RemovedNodes: []string{"n1"}})), false},
		{"a replica step goes to proto",
			mustMarshal(t, delta(&slotdv1.MapDelta{FromVersion: 9, Version: 10, Slots: []*slotdv1.SlotOwner{{Slot: 1000, Owner: "n3"}},
				Replicas: []*slotdv1.SlotReplicas{{Slot: 1000, Epoch: 10, Followers: []string{"n2", "n1"}, Learners: []string{"n4"}}}})), false},
		{"a full map goes to proto",
			mustMarshal(t, &slotdv1.WatchMapResponse{Update: &slotdv1.WatchMapResponse_Full{Full: &slotdv1.SlotMap{Version: 3, ClusterId: "c"}}}), false},
		{"empty response", nil, false},
		{"two deltas are merged by proto",
			append(mustMarshal(t, delta(&slotdv1.MapDelta{FromVersion: 1})), mustMarshal(t, delta(&slotdv1.MapDelta{Version: 2}))...), false},
		{"an unknown field is kept by proto",
			protowire.AppendBytes(protowire.AppendTag(nil, respDelta, protowire.BytesType),
				protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)), false},
		{"a known field with another wire type",
			protowire.AppendBytes(protowire.AppendTag(nil, respDelta, protowire.BytesType),
				protowire.AppendBytes(protowire.AppendTag(nil, deltaVersion, protowire.BytesType), []byte("x"))), false},
		{"invalid UTF-8 fails as in proto",
			protowire.AppendBytes(protowire.AppendTag(nil, respDelta, protowire.BytesType),
				protowire.AppendBytes(protowire.AppendTag(nil, deltaSlots, protowire.BytesType),
					protowire.AppendBytes(protowire.AppendTag(nil, ownerID, protowire.BytesType), []byte{0xff, 0xfe}))), false},
		{"truncated", mustMarshal(t, delta(&slotdv1.MapDelta{FromVersion: 7, Version: 8}))[:3], false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var d Decoder
			if fast := check(t, &d, tc.b); fast != tc.fast {
				t.Errorf("fast path %v, want %v", fast, tc.fast)
			}
		})
	}
}

// TestDecodeReuses decodes a stream of random updates with one Decoder:
// every result matches proto.Unmarshal although the Decoder reuses its
// messages and strings, and a delta naming known strings allocates nothing.
func TestDecodeReuses(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]string, 100) // more than the Decoder keeps
	for i := range ids {
		ids[i] = fmt.Sprintf("n%03d", i)
	}
	var d Decoder
	for i := range 2000 {
		dl := &slotdv1.MapDelta{FromVersion: uint64(i), Version: uint64(i + 1)}
		for range r.IntN(4) {
			dl.Slots = append(dl.Slots, &slotdv1.SlotOwner{Slot: r.Uint32N(16384), Owner: ids[r.IntN(len(ids))]})
		}
		for range r.IntN(3) {
			dl.Migrations = append(dl.Migrations, &slotdv1.Migration{Slot: r.Uint32N(16384), From: ids[r.IntN(len(ids))], To: ids[r.IntN(len(ids))],
				Phase: slotdv1.MovePhase(r.IntN(7)), MoveId: fmt.Sprintf("m-%d", r.IntN(10))})
		}
		if r.IntN(50) == 0 {
			dl.Nodes = []*slotdv1.Node{{Id: ids[r.IntN(len(ids))]}}
		}
		check(t, &d, mustMarshal(t, delta(dl)))
	}

	b := mustMarshal(t, delta(&slotdv1.MapDelta{FromVersion: 1, Version: 2, Slots: []*slotdv1.SlotOwner{{Slot: 9, Owner: "n1"}},
		Migrations: []*slotdv1.Migration{{Slot: 10, From: "n1", To: "n2", MoveId: "m-x"}}}))
	if _, err := d.Decode(b); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := d.Decode(b); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Decode of a delta naming known strings: %v allocations, want 0", n)
	}
}

func TestCodec(t *testing.T) {
	c := NewCodec()
	want := delta(&slotdv1.MapDelta{FromVersion: 1, Version: 2})
	data, err := c.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var f Frame
	for range 2 { // the second time into the buffer of the first
		if err := c.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		if string(f.B) != string(data.Materialize()) {
			t.Fatalf("Frame holds % x, want % x", f.B, data.Materialize())
		}
	}
	got := new(slotdv1.WatchMapResponse)
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(f.B)}, got); err != nil || !proto.Equal(got, want) {
		t.Fatalf("Unmarshal into a message: %v, %v; want %v", got, err, want)
	}
	if c.Name() != "proto" {
		t.Errorf("Name() = %q, want proto (the content-subtype must not change)", c.Name())
	}
}

// FuzzDecode: for any bytes, Decode gives what proto.Unmarshal gives.
func FuzzDecode(f *testing.F) {
	f.Add(mustMarshal(f, delta(&slotdv1.MapDelta{FromVersion: 7, Version: 8, Slots: []*slotdv1.SlotOwner{{Slot: 1000, Owner: "n2"}}})))
	f.Add(mustMarshal(f, delta(&slotdv1.MapDelta{Migrations: []*slotdv1.Migration{{Slot: 1, From: "a", To: "b", Phase: 4, MoveId: "m"}}})))
	f.Add(mustMarshal(f, delta(&slotdv1.MapDelta{Nodes: []*slotdv1.Node{{Id: "n"}}})))
	f.Add(mustMarshal(f, delta(&slotdv1.MapDelta{Replicas: []*slotdv1.SlotReplicas{{Slot: 3, Epoch: 9, Followers: []string{"b"}, Learners: []string{"c"}}}})))
	var d Decoder // one for all inputs: reuse must not leak between them
	f.Fuzz(func(t *testing.T, b []byte) { check(t, &d, b) })
}

// BenchmarkDecode decodes a commit's delta (one slot) and a fence's (one
// move in flight) with a Decoder and with proto.Unmarshal into a new
// message, as the client did before.
func BenchmarkDecode(b *testing.B) {
	for _, tc := range []struct {
		name string
		d    *slotdv1.MapDelta
	}{
		{"commit", &slotdv1.MapDelta{FromVersion: 7, Version: 8, Slots: []*slotdv1.SlotOwner{{Slot: 1000, Owner: "n2"}}}},
		{"fence", &slotdv1.MapDelta{FromVersion: 8, Version: 9, Migrations: []*slotdv1.Migration{
			{Slot: 1001, From: "n1", To: "n2", Phase: slotdv1.MovePhase_MOVE_PHASE_FENCED, MoveId: "mv-0123456789abcdef"}}}},
	} {
		buf := mustMarshal(b, delta(tc.d))
		b.Run(tc.name+"/decoder", func(b *testing.B) {
			var d Decoder
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Decode(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/proto", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := proto.Unmarshal(buf, new(slotdv1.WatchMapResponse)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
