package slotkv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testNode is one slotkv served on a real 127.0.0.1 socket.
type testNode struct {
	t      testing.TB
	id     string
	dir    string
	m      *node.StaticMap
	srv    *Server
	g      *grpc.Server
	addr   string
	conn   *grpc.ClientConn
	kv     kvpb.KVClient
	store  slotdv1.StoreClient
	cancel context.CancelFunc
	done   chan struct{}
}

type nodeOpts struct {
	noSync bool
	rate   int64
}

// startNode opens dir as node id and serves it on a fresh port. The caller
// places the node in m; m must already hold a map for writes to succeed.
func startNode(t testing.TB, id, dir string, m *node.StaticMap, o nodeOpts) *testNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Open(Config{
		ID: id, DataDir: dir, Map: m, NoSync: o.noSync, ExportBytesPerSecond: o.rate,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		lis.Close()
		t.Fatal(err)
	}
	tn := &testNode{t: t, id: id, dir: dir, m: m, srv: srv, g: grpc.NewServer(srv.ServerOptions()...), addr: lis.Addr().String(), done: make(chan struct{})}
	srv.Register(tn.g)
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel = cancel
	served := make(chan struct{})
	go func() { defer close(served); _ = tn.g.Serve(lis) }()
	go func() { defer close(tn.done); _ = srv.Run(ctx); <-served }()
	tn.conn, err = grpc.NewClient(tn.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	tn.kv = kvpb.NewKVClient(tn.conn)
	tn.store = slotdv1.NewStoreClient(tn.conn)
	t.Cleanup(tn.stop)
	return tn
}

// stop shuts the node down in order: 1. client conn, 2. gRPC server (ends
// in-flight calls), 3. background work, 4. files. It is idempotent.
func (tn *testNode) stop() {
	if tn.srv == nil {
		return
	}
	tn.conn.Close()
	tn.g.Stop()
	tn.cancel()
	<-tn.done
	if err := tn.srv.Close(); err != nil {
		tn.t.Errorf("close %s: %v", tn.id, err)
	}
	tn.srv = nil
}

// restart stops the node and opens the same data dir on a new port.
func (tn *testNode) restart(o nodeOpts) *testNode {
	tn.stop()
	return startNode(tn.t, tn.id, tn.dir, tn.m, o)
}

// keysIn returns n distinct keys that all hash to one slot (a hash tag).
func keysIn(tag string, n int) ([][]byte, slots.Slot) {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "{%s}:key-%06d", tag, i)
	}
	return out, slots.ForString("{" + tag + "}")
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// exportAll streams a whole export from cursor and returns its batches.
func exportAll(ctx context.Context, t testing.TB, src *testNode, s slots.Slot, moveID string, cursor []byte, maxBatch uint32) []*slotdv1.ExportBatch {
	t.Helper()
	st, err := src.store.Export(ctx, &slotdv1.ExportRequest{Slot: uint32(s.Int()), MoveId: moveID, Cursor: cursor, MaxBatchBytes: maxBatch})
	if err != nil {
		t.Fatal(err)
	}
	var out []*slotdv1.ExportBatch
	for {
		b, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		out = append(out, b)
	}
}

// importBatches forwards export batches to dst, numbering them from first.
func importBatches(ctx context.Context, t testing.TB, dst *testNode, s slots.Slot, moveID string, batches []*slotdv1.ExportBatch, first uint64) (dups int) {
	t.Helper()
	for i, b := range batches {
		resp, err := dst.store.Import(ctx, &slotdv1.ImportRequest{Slot: uint32(s.Int()), MoveId: moveID, Batch: &slotdv1.ImportRequest_Snapshot{Snapshot: &slotdv1.SnapshotImport{
			BatchSeq: first + uint64(i), Entries: b.Entries, Cursor: b.Cursor, SnapshotSeq: b.SnapshotSeq, Done: b.Done,
		}}})
		if err != nil {
			t.Fatalf("import batch %d: %v", first+uint64(i), err)
		}
		if resp.Duplicate {
			dups++
		}
	}
	return dups
}

// replayChanges streams changes after `after` from src into dst and returns
// the last sequence applied and the fence sequence seen (0 if none).
func replayChanges(ctx context.Context, t testing.TB, src, dst *testNode, s slots.Slot, moveID string, after uint64, follow bool) (last, fence uint64) {
	t.Helper()
	st, err := src.store.Changes(ctx, &slotdv1.ChangesRequest{Slot: uint32(s.Int()), MoveId: moveID, AfterSeq: after, Follow: follow})
	if err != nil {
		t.Fatal(err)
	}
	last = after
	for {
		b, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return last, fence
		}
		if err != nil {
			t.Fatalf("changes: %v", err)
		}
		fence = max(fence, b.FenceSeq)
		if len(b.Changes) == 0 {
			continue
		}
		if _, err := dst.store.Import(ctx, &slotdv1.ImportRequest{Slot: uint32(s.Int()), MoveId: moveID, Batch: &slotdv1.ImportRequest_Changes{Changes: &slotdv1.ChangeImport{Changes: b.Changes}}}); err != nil {
			t.Fatalf("import changes: %v", err)
		}
		last = b.Changes[len(b.Changes)-1].Seq
	}
}

func checksum(ctx context.Context, t testing.TB, tn *testNode, s slots.Slot) *slotdv1.ChecksumResponse {
	t.Helper()
	c, err := tn.store.Checksum(ctx, &slotdv1.ChecksumRequest{Slot: uint32(s.Int())})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eventually polls cond until it holds or the bound passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, 20*time.Second, what, cond)
}
