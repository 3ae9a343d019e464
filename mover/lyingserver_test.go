package mover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

// lyingServer is a Store server in front of a real node that forwards
// every call, through a lyingStore that may rewrite the answers: a
// hostile store as the executor sees it, over a real socket.
type lyingServer struct {
	slotdv1.UnimplementedStoreServer
	c *lyingStore
}

func (s *lyingServer) Export(in *slotdv1.ExportRequest, out grpc.ServerStreamingServer[slotdv1.ExportBatch]) error {
	st, err := s.c.Export(out.Context(), in)
	if err != nil {
		return err
	}
	return forward(st, out.Send)
}

func (s *lyingServer) Changes(in *slotdv1.ChangesRequest, out grpc.ServerStreamingServer[slotdv1.ChangeBatch]) error {
	st, err := s.c.Changes(out.Context(), in)
	if err != nil {
		return err
	}
	return forward(st, out.Send)
}

func forward[T any](in grpc.ServerStreamingClient[T], send func(*T) error) error {
	for {
		m, err := in.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := send(m); err != nil {
			return err
		}
	}
}

func (s *lyingServer) SetExportRate(ctx context.Context, in *slotdv1.SetExportRateRequest) (*slotdv1.SetExportRateResponse, error) {
	return s.c.SetExportRate(ctx, in)
}
func (s *lyingServer) EndCapture(ctx context.Context, in *slotdv1.EndCaptureRequest) (*slotdv1.EndCaptureResponse, error) {
	return s.c.EndCapture(ctx, in)
}
func (s *lyingServer) Import(ctx context.Context, in *slotdv1.ImportRequest) (*slotdv1.ImportResponse, error) {
	return s.c.Import(ctx, in)
}
func (s *lyingServer) ImportStatus(ctx context.Context, in *slotdv1.ImportStatusRequest) (*slotdv1.ImportStatusResponse, error) {
	return s.c.ImportStatus(ctx, in)
}
func (s *lyingServer) Fence(ctx context.Context, in *slotdv1.FenceRequest) (*slotdv1.FenceResponse, error) {
	return s.c.Fence(ctx, in)
}
func (s *lyingServer) Unfence(ctx context.Context, in *slotdv1.UnfenceRequest) (*slotdv1.UnfenceResponse, error) {
	return s.c.Unfence(ctx, in)
}
func (s *lyingServer) SlotStats(ctx context.Context, in *slotdv1.SlotStatsRequest) (*slotdv1.SlotStatsResponse, error) {
	return s.c.SlotStats(ctx, in)
}
func (s *lyingServer) DropSlot(ctx context.Context, in *slotdv1.DropSlotRequest) (*slotdv1.DropSlotResponse, error) {
	return s.c.DropSlot(ctx, in)
}
func (s *lyingServer) Checksum(ctx context.Context, in *slotdv1.ChecksumRequest) (*slotdv1.ChecksumResponse, error) {
	return s.c.Checksum(ctx, in)
}

// serveLies serves l on a real socket until the test ends and returns
// its address.
func serveLies(t *testing.T, l *lyingStore) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	slotdv1.RegisterStoreServer(srv, &lyingServer{c: l})
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	return lis.Addr().String()
}

// storeAt is the cluster's StorePool client of addr.
func storeAt(t *testing.T, c *cluster, addr string) slotdv1.StoreClient {
	sc, err := c.pool.client(addr)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestExecutorAbortsOnLyingSource runs a one-slot plan on the executor
// while the source's Store API (reached through a proxy the directory
// names as its address) slips a key of another slot into the export. The
// move is aborted, the plan pauses with a reason naming the lie, the
// source keeps the slot and every key, and the target holds nothing.
func TestExecutorAbortsOnLyingSource(t *testing.T) {
	c := newCluster(t, 2)
	c.addNode("n3")
	foreign := []byte("{planted}:key")
	src := c.nodes["n1"]
	srcStore, err := c.pool.client(src.addr)
	if err != nil {
		t.Fatal(err)
	}
	liar := &lyingStore{StoreClient: srcStore, export: func(b *slotdv1.ExportBatch) bool {
		if len(b.Entries) == 0 {
			return false
		}
		b.Entries = append(b.Entries, &slotdv1.Entry{Key: foreign, Value: []byte("evil")})
		return true
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := grpc.NewServer()
	slotdv1.RegisterStoreServer(proxy, &lyingServer{c: liar})
	served := make(chan struct{})
	go func() { defer close(served); _ = proxy.Serve(lis) }()
	_, stopExecutor := c.startExecutor("a")
	// Cleanups run last-registered first: stop the executor (idempotent;
	// the cluster's cleanup stops it again) before its store goes away.
	t.Cleanup(func() { stopExecutor(); proxy.Stop(); <-served })
	// slotd learns a store's address from its registration: re-register n1
	// at the proxy.
	if _, err := c.dir.RegisterNode(c.ctx, directory.Node{ID: "n1", Addr: lis.Addr().String(), Weight: 1}); err != nil {
		t.Fatal(err)
	}

	snap, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	slot := -1
	for s := range slots.Count {
		if snap.Owner(slots.MustNew(s)) == "n1" && s != slots.ForKey(foreign).Int() {
			slot = s
			break
		}
	}
	keys := keysInSlots(map[int]bool{slot: true}, 50)
	for _, k := range keys {
		if err := c.put(c.ctx, k, k); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.ctl.MoveSlot(c.ctx, slot, "n3", "test", "hostile source")
	if err != nil {
		t.Fatal(err)
	}
	paused := c.waitPlan(p.ID, StatePaused)
	if !liar.didFire() {
		t.Fatal("the source never lied")
	}
	for _, w := range []string{fmt.Sprintf("slot %d", slot), "aborted", string(foreign), "inconsistent data"} {
		if !strings.Contains(paused.Error, w) {
			t.Errorf("plan error %q does not say %q", paused.Error, w)
		}
	}
	// Recorded as failed, with its reason, where status reads it.
	if m := paused.Moves[0]; m.Status != MoveFailed || !strings.Contains(m.Error, "inconsistent data") || paused.Progress().Failed != 1 {
		t.Errorf("the move after the lie: %s %q, progress %+v; want failed with the reason", m.Status, m.Error, paused.Progress())
	}
	after, err := c.dir.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o := after.Owner(slots.MustNew(slot)); o != "n1" {
		t.Fatalf("slot %d owned by %s after the aborted move, want n1", slot, o)
	}
	if len(after.Moves) != 0 {
		t.Fatalf("%d moves still in flight", len(after.Moves))
	}
	for _, k := range keys {
		got, err := c.get(k)
		if err != nil || !bytes.Equal(got, k) {
			t.Fatalf("get %q after abort: %q, %v", k, got, err)
		}
	}
	if err := c.put(c.ctx, keys[0], []byte("after")); err != nil {
		t.Fatalf("write after abort: %v", err)
	}
	dst, err := c.pool.client(c.nodes["n3"].addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []int{slot, slots.ForKey(foreign).Int()} {
		waitfor.Err(c.t, 30*time.Second, "target holds nothing", func() error {
			sum, err := dst.Checksum(c.ctx, &slotdv1.ChecksumRequest{Slot: uint32(s)})
			if err != nil {
				return err
			}
			if sum.Keys != 0 {
				return fmt.Errorf("target holds %d keys of slot %d", sum.Keys, s)
			}
			return nil
		})
	}
}
