package console_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/mover"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/server/servertest"
	"github.com/slotd/slotd/slotkv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is a real slotd (package server, its HTTP port serving the
// console, mover on) and real slotkv stores, in this process on 127.0.0.1.
type cluster struct {
	slotd   *servertest.Slotd
	admin   slotdv1.AdminClient
	stores  map[string]string         // node id -> address
	servers map[string]*slotkv.Server // node id -> store
	maps    map[string]*node.ClusterMap
}

// startCluster starts slotd and stores n1..nN, and bootstraps the
// directory over them; edits change slotd's configuration (TLS).
func startCluster(t testing.TB, stores int, edits ...func(*server.Config)) *cluster {
	t.Helper()
	s := servertest.Start(t, append([]func(*server.Config){func(c *server.Config) {
		c.HTTP = "127.0.0.1:0"
		c.TuneMover = func(ec *mover.ExecutorConfig) {
			ec.Backoff, ec.DisableLiveness = 20*time.Millisecond, true
		}
	}}, edits...)...)
	c := &cluster{slotd: s, stores: map[string]string{}, servers: map[string]*slotkv.Server{}, maps: map[string]*node.ClusterMap{}}
	if len(edits) > 0 {
		return c // TLS: the caller dials with its own credentials
	}
	c.admin = slotdv1.NewAdminClient(s.Dial(t))
	req := &slotdv1.BootstrapRequest{Vnodes: 16, Operator: "test"}
	for i := 1; i <= stores; i++ {
		id := "n" + string(rune('0'+i))
		c.stores[id], c.servers[id], c.maps[id] = startStoreServer(t, id, s.Addr())
		req.Nodes = append(req.Nodes, &slotdv1.Node{Id: id, Address: c.stores[id], Weight: 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.admin.Bootstrap(ctx, req); err != nil {
		t.Fatal(err)
	}
	for id, cm := range c.maps {
		waitfor.True(t, 30*time.Second, "store "+id+" holding the map", cm.Assigned)
	}
	return c
}

// startStore serves a slotkv store that follows slotd's map.
func startStore(t testing.TB, id, slotdAddr string) string {
	t.Helper()
	addr, _, _ := startStoreServer(t, id, slotdAddr)
	return addr
}

// reportLoad makes the stores ids send their load to slotd every second,
// as slotkv does (node.Reporter), until the test ends.
func (c *cluster) reportLoad(t testing.TB, ids ...string) {
	t.Helper()
	lc := slotdv1.NewLoadClient(c.slotd.Dial(t))
	for _, id := range ids {
		rep, err := node.NewReporter(node.ReporterConfig{Node: c.servers[id].Node(), Replicas: []slotdv1.LoadClient{lc}, Interval: time.Second,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = rep.Run(ctx) }()
		t.Cleanup(func() { stop(); <-done })
	}
}

func startStoreServer(t testing.TB, id, slotdAddr string) (string, *slotkv.Server, *node.ClusterMap) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	cm, err := node.NewClusterMap(client.Options{Endpoints: []string{slotdAddr},
		ReconnectBackoff: 10 * time.Millisecond, MaxReconnectBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := slotkv.Open(slotkv.Config{ID: id, DataDir: t.TempDir(), Map: cm, NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = g.Serve(lis) }()
	go func() { defer wg.Done(); _ = cm.Run(runCtx) }()
	go func() {
		defer wg.Done()
		if err := srv.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("slotkv %s: %v", id, err)
		}
	}()
	t.Cleanup(func() {
		g.Stop()
		stop()
		wg.Wait()
		srv.Close()
	})
	return lis.Addr().String(), srv, cm
}

// owners reads the owner of every slot from the directory in etcd: the
// truth the console must show.
func (c *cluster) owners(t testing.TB) (version uint64, owners []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := c.slotd.Directory(t).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version, snap.Owners()
}
