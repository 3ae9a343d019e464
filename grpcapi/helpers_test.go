package grpcapi

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/load"
	"github.com/slotd/slotd/migrations"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/slots"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCtx is bounded well below the test timeout and ends with the test.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test after 20s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, 20*time.Second, what, cond)
}

// newDir returns a Directory on c with the schema in place.
func newDir(t testing.TB, c *etcdtest.Cluster) *directory.Directory {
	t.Helper()
	d, err := directory.New(directory.Config{Client: c.NewClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Apply(testCtx(t), d); err != nil {
		t.Fatal(err)
	}
	return d
}

// bootstrap bootstraps d with nodes a, b and c.
func bootstrap(t testing.TB, d *directory.Directory) *directory.Snapshot {
	t.Helper()
	snap, err := d.Bootstrap(testCtx(t), []directory.Node{
		{ID: "a", Addr: "127.0.0.1:7001", Weight: 1},
		{ID: "b", Addr: "127.0.0.1:7002", Weight: 1},
		{ID: "c", Addr: "127.0.0.1:7003", Weight: 1},
	}, 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// moveSlot moves slot s to node to through the directory's move protocol
// (no data: there are no stores) and returns the committed version.
func moveSlot(t testing.TB, d *directory.Directory, s int, to string) uint64 {
	t.Helper()
	ctx := testCtx(t)
	snap, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sl := slots.MustNew(s)
	mv, err := d.BeginMove(ctx, directory.MoveSpec{Slot: sl, From: snap.Owner(sl), To: to, Reason: "test", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.AdvanceMove(ctx, sl, mv.MoveID, directory.PhaseFenced); err != nil {
		t.Fatal(err)
	}
	v, err := d.CommitMove(ctx, sl, mv.MoveID, "test")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// otherThan returns a node of a, b, c that does not own slot s.
func otherThan(t testing.TB, d *directory.Directory, s int) string {
	t.Helper()
	snap, err := d.Snapshot(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if snap.Owner(slots.MustNew(s)) != id {
			return id
		}
	}
	t.Fatal("no other node")
	return ""
}

// server is a Service on a real gRPC server on 127.0.0.1.
type server struct {
	svc    *Service
	srv    *grpc.Server
	lis    net.Listener
	cancel context.CancelFunc
	done   chan error // the hub's Run result
	served chan struct{}
}

// newHub is a hub over d for cluster "test", keeping keep deltas (0: the
// default).
func newHub(t testing.TB, d *directory.Directory, keep int) *Hub {
	t.Helper()
	h, err := NewHub(HubConfig{Directory: d, ClusterID: "test", Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// startServer serves a Service over d on addr ("127.0.0.1:0" for a free
// port). It is stopped when the test ends, if not before.
func startServer(t testing.TB, d *directory.Directory, addr string, mod func(*Config), opts ...grpc.ServerOption) *server {
	t.Helper()
	ctl, err := mover.NewControl(mover.ControlConfig{Directory: d})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Directory: d, Control: ctl, ServerID: "s1"}
	if mod != nil {
		mod(&cfg)
	}
	if cfg.Hub == nil {
		cfg.Hub = newHub(t, d, 0)
	}
	if cfg.Load, err = load.New(load.Config{Map: cfg.Hub}); err != nil {
		t.Fatal(err)
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var lis net.Listener
	// A restarted server takes its predecessor's port, which the kernel
	// may not have released yet.
	waitfor.Err(t, 2*time.Second, "listen on "+addr, func() (err error) {
		lis, err = net.Listen("tcp", addr)
		return err
	})
	srv := grpc.NewServer(append(ServerOptions(), opts...)...)
	svc.Register(srv)
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{svc: svc, srv: srv, lis: lis, cancel: cancel, done: make(chan error, 1), served: make(chan struct{})}
	go func() { s.done <- svc.Run(ctx) }()
	go func() { defer close(s.served); _ = srv.Serve(lis) }()
	t.Cleanup(s.stop)
	return s
}

func (s *server) addr() string { return s.lis.Addr().String() }

// stop shuts down like slotd: stop accepting, end the watch streams (the
// hub stops), wait for the handlers. Safe to call twice.
func (s *server) stop() {
	stopped := make(chan struct{})
	go func() { s.srv.GracefulStop(); close(stopped) }()
	s.cancel()
	<-stopped
	<-s.served
	if s.done != nil {
		if err := <-s.done; err != nil && !errors.Is(err, context.Canceled) {
			panic(err)
		}
		s.done = nil
	}
}

// dial returns a plaintext connection to addr, closed when the test ends.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// newClient returns an SDK client of the endpoints, closed when the test ends.
func newClient(t testing.TB, endpoints ...string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Options{
		Endpoints:           endpoints,
		ReconnectBackoff:    10 * time.Millisecond,
		MaxReconnectBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func versionAtLeast(c *client.Client, v uint64) func() bool {
	return func() bool { m := c.Map(); return m != nil && m.Version() >= v }
}
