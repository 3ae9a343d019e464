package slotkv

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/grpcapi"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/manualclock"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/migrations"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slots"
)

// The reconciliation tests' cluster: slotd's services over an embedded
// etcd, real slotkv stores, a clock that moves when the test says, and the
// hand-driven steps of a move.

// recCluster is etcd, a directory with nodes a and b, and slotd's services
// on a real port.
type recCluster struct {
	t     *testing.T
	dir   *directory.Directory
	addr  string
	conn  *grpc.ClientConn
	clock *manualclock.Clock
	nodes map[string]string // id -> data dir
}

func newRecCluster(t *testing.T, mods ...func(*directory.Config)) *recCluster {
	t.Helper()
	ctx := context.Background()
	e := etcdtest.New(t)
	dcfg := directory.Config{Client: e.NewClient(t)}
	for _, mod := range mods {
		mod(&dcfg)
	}
	d, err := directory.New(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	ctl, err := mover.NewControl(mover.ControlConfig{Directory: d})
	if err != nil {
		t.Fatal(err)
	}
	maps, err := grpcapi.NewHub(grpcapi.HubConfig{Directory: d, ClusterID: "rec"})
	if err != nil {
		t.Fatal(err)
	}
	agg, err := load.New(load.Config{Map: maps})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := grpcapi.New(grpcapi.Config{Directory: d, Hub: maps, Load: agg, Control: ctl, ServerID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpcapi.ServerOptions()...)
	svc.Register(g)
	sctx, cancel := context.WithCancel(ctx)
	hub := make(chan struct{})
	served := make(chan struct{})
	go func() { defer close(hub); _ = svc.Run(sctx) }()
	go func() { defer close(served); _ = g.Serve(lis) }()
	t.Cleanup(func() { cancel(); g.Stop(); <-served; <-hub })
	c := &recCluster{t: t, dir: d, addr: lis.Addr().String(), clock: manualclock.New(time.Unix(5000, 0)), nodes: map[string]string{}}
	c.conn, err = grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.conn.Close() })
	return c
}

// recStore is one slotkv in the cluster: its map from slotd's watch, its
// fresh map from slotd's Recovery service.
type recStore struct {
	id     string
	srv    *Server
	cancel context.CancelFunc
	done   chan struct{}
	stopMu sync.Once
}

func (c *recCluster) start(id string) *recStore {
	t := c.t
	t.Helper()
	if c.nodes[id] == "" {
		c.nodes[id] = t.TempDir()
	}
	cm, err := node.NewClusterMap(client.Options{Endpoints: []string{c.addr}, ReconnectBackoff: 10 * time.Millisecond, MaxReconnectBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rc := slotdv1.NewRecoveryClient(c.conn)
	srv, err := Open(Config{
		ID: id, DataDir: c.nodes[id], Map: cm, NoSync: true, Logger: slog.New(slog.DiscardHandler),
		Clock: c.clock, ReconcileInterval: -1,
		FreshMap: func(ctx context.Context) (*slotmap.Map, error) {
			resp, err := rc.FreshMap(ctx, &slotdv1.FreshMapRequest{})
			if err != nil {
				return nil, err
			}
			return slotmap.FromProto(resp.GetMap())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &recStore{id: id, srv: srv, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.Run(ctx) }()
	go func() { defer wg.Done(); _ = cm.Run(ctx) }()
	go func() { wg.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	return s
}

func (s *recStore) stop() {
	s.stopMu.Do(func() {
		s.cancel()
		<-s.done
		s.srv.Close()
	})
}

func (s *recStore) n() *node.Node { return s.srv.Node() }

// mapAt waits until the store's map has reached version v.
func (c *recCluster) mapAt(s *recStore, v uint64) {
	c.t.Helper()
	waitfor.True(c.t, 20*time.Second, s.id+"'s map reaching the version", func() bool { return s.n().MapVersion() >= v })
}

// reconcile runs a pass, moves the clock past the grace, and runs another
// (plus one to see the result): what the fresh map leaves unexplained is
// cleaned up.
func (c *recCluster) reconcile(s *recStore) {
	c.t.Helper()
	ctx := context.Background()
	if _, err := s.n().ReconcileOnce(ctx); err != nil {
		c.t.Fatalf("%s: reconcile: %v", s.id, err)
	}
	c.clock.Advance(node.DefaultReconcileGrace)
	if _, err := s.n().ReconcileOnce(ctx); err != nil {
		c.t.Fatalf("%s: reconcile: %v", s.id, err)
	}
}

// clean waits until the store has finished its drops, then checks with a
// pass that nothing is left unexplained.
func (c *recCluster) clean(s *recStore) {
	c.t.Helper()
	waitfor.True(c.t, 20*time.Second, s.id+" clean", func() bool {
		if _, err := s.n().ReconcileOnce(context.Background()); err != nil {
			return false
		}
		for i := range slots.Count {
			if s.n().Dropping(slots.MustNew(i)) {
				return false // its last batch (and the fence it lifts) may still come
			}
		}
		return s.n().OrphanBytes() == 0
	})
}

func (c *recCluster) bootstrap(ids ...string) {
	c.t.Helper()
	if len(ids) == 0 {
		ids = []string{"a", "b"}
	}
	var nodes []directory.Node
	for i, id := range ids {
		nodes = append(nodes, directory.Node{ID: id, Addr: "127.0.0.1:" + string(rune('1'+i)), Weight: 1})
	}
	_, err := c.dir.Bootstrap(context.Background(), nodes, 0, "test")
	if err != nil {
		c.t.Fatal(err)
	}
}

// slotOf returns a slot owned by id.
func (c *recCluster) slotOf(id string) slots.Slot {
	c.t.Helper()
	snap, err := c.dir.Snapshot(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	set := snap.SlotsOf(id)
	for s := range set.All() {
		return s
	}
	c.t.Fatalf("%s owns nothing", id)
	return slots.Slot{}
}

// write puts n keys into slot s on store st through the node library.
func write(t *testing.T, st *recStore, s slots.Slot, n int) {
	t.Helper()
	ctx := context.Background()
	written := 0
	for i := 0; written < n; i++ {
		k := []byte("k" + string(rune('a'+i%26)) + time.Duration(i).String())
		if slots.ForKey(k) != s {
			continue
		}
		err := st.n().Write(ctx, k, func() ([]node.Mutation, error) {
			return []node.Mutation{{Key: k, Value: make([]byte, 1000)}}, nil
		})
		if err != nil {
			t.Fatalf("write to slot %d on %s: %v", s.Int(), st.id, err)
		}
		written++
	}
}

func bytesOf(t *testing.T, st *recStore, s slots.Slot) int64 {
	t.Helper()
	_, b, err := st.srv.Engine().SlotSize(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// copySlot copies slot s from src to dst for move id as the mover would:
// snapshot through Export and ImportSnapshot, then the fence.
func copySlot(t *testing.T, src, dst *recStore, s slots.Slot, id string, fence bool) {
	t.Helper()
	ctx := context.Background()
	var cursor []byte
	for seq := uint64(1); ; seq++ {
		b, err := src.n().Export(ctx, s, id, cursor, 0)
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		if _, _, err := dst.n().ImportSnapshot(ctx, s, id, node.SnapshotBatch{BatchSeq: seq, Entries: b.Entries, Cursor: b.Cursor, SnapshotSeq: b.SnapshotSeq, Done: b.Done}); err != nil {
			t.Fatalf("import: %v", err)
		}
		cursor = b.Cursor
		if b.Done {
			break
		}
	}
	if fence {
		if _, err := src.n().Fence(ctx, s, id, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// begin starts a move of s to "to" and returns its id.
func (c *recCluster) begin(s slots.Slot, from, to string) string {
	c.t.Helper()
	mv, err := c.dir.BeginMove(context.Background(), directory.MoveSpec{Slot: s, From: from, To: to, Reason: "test", By: "test"})
	if err != nil {
		c.t.Fatal(err)
	}
	return mv.MoveID
}

func (c *recCluster) commit(s slots.Slot, id string) uint64 {
	c.t.Helper()
	ctx := context.Background()
	if _, err := c.dir.AdvanceMove(ctx, s, id, directory.PhaseFenced); err != nil {
		c.t.Fatal(err)
	}
	v, err := c.dir.CommitMove(ctx, s, id, "test")
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}
