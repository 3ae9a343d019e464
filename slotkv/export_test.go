package slotkv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

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
