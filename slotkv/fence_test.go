package slotkv

import (
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slotkv/kvpb"
)

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
