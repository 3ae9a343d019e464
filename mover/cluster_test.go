package mover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	slotdv1 "github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/slotkv"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testLogger() *slog.Logger {
	if os.Getenv("MOVER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// dirMap is a node.MapSource fed by a directory watch: what the SDK's map
// cache is in production, without slotd in between.
type dirMap struct {
	snap atomic.Pointer[directory.Snapshot]
}

func (m *dirMap) Owner(s slots.Slot) (node.Owner, bool) {
	snap := m.snap.Load()
	if snap == nil {
		return node.Owner{}, false
	}
	id := snap.Owner(s)
	n, _ := snap.Node(id)
	return node.Owner{ID: id, Addr: n.Addr, Version: snap.Version}, true
}

// kvNode is one slotkv on a real socket.
type kvNode struct {
	id, addr, dir string
	srv           *slotkv.Server
	g             *grpc.Server
	kv            kvpb.KVClient
	conn          *grpc.ClientConn
	cancel        context.CancelFunc
	done          chan struct{}
}

func (n *kvNode) stop() {
	if n.srv == nil {
		return
	}
	n.conn.Close()
	n.g.Stop()
	n.cancel()
	<-n.done
	n.srv.Close()
	n.srv = nil
}

// cluster is a directory on a real etcd, slotkv nodes, and one or more
// executors.
type cluster struct {
	t     testing.TB
	ctx   context.Context
	etcd  *etcdtest.Cluster
	dir   *directory.Directory
	ctl   *Control
	pool  *StorePool
	m     *dirMap
	nodes map[string]*kvNode
	wg    sync.WaitGroup
	stops []func()
	// onExport, if set, sees every Export stream a node serves: its
	// start (once the request is read) and its end.
	onExport atomic.Pointer[func(node string, slot uint32, start bool)]
}

// exportStream tells onExport that an Export stream started, once its
// request is read, and ended, when its last batch is sent (before the
// mover can have it) or the handler returns.
type exportStream struct {
	grpc.ServerStream
	f             func(node string, slot uint32, start bool)
	node          string
	slot          uint32
	started, done bool
}

func (s *exportStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if r, ok := m.(*slotdv1.ExportRequest); ok && err == nil && !s.started {
		s.slot, s.started = r.Slot, true
		s.f(s.node, r.Slot, true)
	}
	return err
}

func (s *exportStream) SendMsg(m any) error {
	if b, ok := m.(*slotdv1.ExportBatch); ok && b.Done {
		s.end()
	}
	return s.ServerStream.SendMsg(m)
}

func (s *exportStream) end() {
	if s.started && !s.done {
		s.done = true
		s.f(s.node, s.slot, false)
	}
}

// watchExports is node id's stream interceptor calling onExport.
func (c *cluster) watchExports(id string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		f := c.onExport.Load()
		if f == nil || info.FullMethod != slotdv1.Store_Export_FullMethodName {
			return handler(srv, ss)
		}
		es := &exportStream{ServerStream: ss, f: *f, node: id}
		defer es.end()
		return handler(srv, es)
	}
}

func newCluster(t *testing.T, n int) *cluster { return newClusterTB(t, n) }

func newClusterTB(t testing.TB, n int) *cluster {
	t.Helper()
	// Bounds a hang only; go test's -timeout bounds the whole run.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	c := &cluster{t: t, ctx: ctx, etcd: etcdtest.New(t), m: &dirMap{}, nodes: map[string]*kvNode{}}
	dir, err := directory.New(directory.Config{Client: c.etcd.Client(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.InitLayout(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dir.SetSchema(ctx, 0, directory.SchemaVersion); err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	var boot []directory.Node
	for i := range n {
		kn := c.startNode(fmt.Sprintf("n%d", i+1), t.TempDir(), "")
		boot = append(boot, directory.Node{ID: kn.id, Addr: kn.addr, Weight: 1})
	}
	snap, err := dir.Bootstrap(ctx, boot, 128, "test")
	if err != nil {
		t.Fatal(err)
	}
	c.m.snap.Store(snap)
	// Keep the nodes' map fresh, as the SDK would.
	wctx, wcancel := context.WithCancel(ctx)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		_ = dir.Watch(wctx, 0, func(s *directory.Snapshot) error { c.m.snap.Store(s); return nil })
	}()
	c.pool = NewStorePool(PoolConfig{})
	c.ctl, err = NewControl(ControlConfig{Directory: dir, Sizes: c.pool, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Shutdown order: 1. executors, 2. the map watch, 3. nodes, 4. pool.
		for i := len(c.stops) - 1; i >= 0; i-- {
			c.stops[i]()
		}
		wcancel()
		c.wg.Wait()
		for _, kn := range c.nodes {
			kn.stop()
		}
		c.pool.Close()
		cancel()
	})
	return c
}

// startNode serves a slotkv node on addr ("" for a free port).
func (c *cluster) startNode(id, dir, addr string) *kvNode {
	c.t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		c.t.Fatal(err)
	}
	// Stores skip fsync unless SLOTD_BENCH_SYNC is set (for benchmarks of
	// durable moves: SLOTD_BENCH_SYNC=1 go test -bench MoveThroughput).
	noSync := os.Getenv("SLOTD_BENCH_SYNC") == ""
	srv, err := slotkv.Open(slotkv.Config{ID: id, DataDir: dir, Map: c.m, NoSync: noSync, Logger: testLogger()})
	if err != nil {
		c.t.Fatal(err)
	}
	kn := &kvNode{id: id, addr: lis.Addr().String(), dir: dir, srv: srv, g: grpc.NewServer(grpc.StreamInterceptor(c.watchExports(id))), done: make(chan struct{})}
	srv.Register(kn.g)
	ctx, cancel := context.WithCancel(context.Background())
	kn.cancel = cancel
	served := make(chan struct{})
	go func() { defer close(served); _ = kn.g.Serve(lis) }()
	go func() { defer close(kn.done); _ = srv.Run(ctx); <-served }()
	kn.conn, err = grpc.NewClient(kn.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	kn.kv = kvpb.NewKVClient(kn.conn)
	c.nodes[id] = kn
	return kn
}

// addNode starts and registers a new node.
func (c *cluster) addNode(id string) *kvNode {
	kn := c.startNode(id, c.t.TempDir(), "")
	if _, err := c.dir.RegisterNode(c.ctx, directory.Node{ID: id, Addr: kn.addr, Weight: 1}); err != nil {
		c.t.Fatal(err)
	}
	return kn
}

// startExecutor runs an executor until the test ends or stop is called.
func (c *cluster) startExecutor(name string) (e *Executor, stop func()) {
	c.t.Helper()
	return c.startExecutorWith(name, nil)
}

// startExecutorWith is startExecutor with the config edited by mod.
func (c *cluster) startExecutorWith(name string, mod func(*ExecutorConfig)) (e *Executor, stop func()) {
	c.t.Helper()
	cfg := ExecutorConfig{
		Directory: c.dir, Control: c.ctl, Etcd: c.etcd.Client(), Stores: c.pool, Name: name,
		Logger: testLogger(), SessionTTL: 2, Backoff: 20 * time.Millisecond,
		DisableLiveness: true, // the test nodes send no heartbeats
		Verify:          true,
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := NewExecutor(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	c.stops = append(c.stops, stop)
	return e, stop
}

// owner returns the owner node of key's slot in the watched map, as a
// client's map cache would (reading etcd per request would load it more
// than the mover does).
func (c *cluster) owner(key []byte) *kvNode {
	o, ok := c.m.Owner(slots.ForKey(key))
	if !ok {
		return nil
	}
	return c.nodes[o.ID]
}

// put writes key=value on its owner, following MOVED and retrying a fence,
// as the SDK does; it returns once the write is acknowledged.
func (c *cluster) put(ctx context.Context, key, value []byte) error {
	var last error
	for attempt := 0; attempt < 200; attempt++ {
		kn := c.owner(key)
		if kn == nil || kn.srv == nil {
			return fmt.Errorf("no live owner for %q", key)
		}
		_, err := kn.kv.Put(ctx, &kvpb.PutRequest{Key: key, Value: value})
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(5 * time.Millisecond) // a redirect or fence: the map is about to change
	}
	return fmt.Errorf("put %q: %w", key, last)
}

func (c *cluster) get(key []byte) ([]byte, error) {
	kn := c.owner(key)
	resp, err := kn.kv.Get(c.ctx, &kvpb.GetRequest{Key: key})
	if err != nil {
		return nil, err
	}
	return resp.Value, nil
}

// watchTable calls fn with every table version after from, in order, on
// one goroutine, until the returned stop is called (which waits for it).
func (c *cluster) watchTable(from uint64, fn func(ctx context.Context, s *directory.Snapshot)) (stop func()) {
	wctx, cancel := context.WithCancel(c.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = c.dir.Watch(wctx, from, func(s *directory.Snapshot) error {
			fn(wctx, s)
			return nil
		})
	}()
	return func() { cancel(); wg.Wait() }
}

// waitPlan waits until plan id reaches a final or paused state.
// runPlan submits plan p, applies it and waits for it to be done.
func (c *cluster) runPlan(p *Plan) {
	c.t.Helper()
	if _, err := c.ctl.Submit(c.ctx, p, "test"); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.ctl.Apply(c.ctx, p.ID, "test"); err != nil {
		c.t.Fatal(err)
	}
	c.waitPlan(p.ID, StateDone)
}

// newExecutor is an executor on the cluster, not started: the test drives
// its steps itself.
func (c *cluster) newExecutor() *Executor {
	c.t.Helper()
	e, err := NewExecutor(ExecutorConfig{Directory: c.dir, Control: c.ctl, Etcd: c.etcd.Client(), Stores: c.pool, Name: "t", Logger: testLogger()})
	if err != nil {
		c.t.Fatal(err)
	}
	return e
}

func (c *cluster) waitPlan(id string, want PlanState) *Plan {
	c.t.Helper()
	var p *Plan
	waitfor.Err(c.t, 90*time.Second, "plan "+id+" "+string(want), func() error {
		var err error
		p, err = c.ctl.Get(c.ctx, id)
		if err != nil {
			return err
		}
		if p.State != want {
			return fmt.Errorf("plan is %s (%s), %d/%d moves done", p.State, p.Error, p.Progress().Done, len(p.Moves))
		}
		return nil
	})
	return p
}

var errStop = errors.New("stop")
