// Package kvtest runs a small slotkv cluster in this process for tests and
// runnable examples: slotd (package server, over its embedded etcd in a
// temporary directory, no mover) and slotkv stores, all on 127.0.0.1 ports,
// bootstrapped so that every slot has an owner. It needs no *testing.T, so
// an Example can use it.
//
// Usage:
//
//	c, err := kvtest.Start(ctx, 2) // slotd + stores n1, n2
//	if err != nil { ... }
//	defer c.Close()
//	sdk, err := client.New(ctx, client.Options{Endpoints: []string{c.Slotd}})
//
// or, in a test, c := kvtest.New(t, 2) (closed when the test ends) and
// sdk, kv := c.KV(t).
package kvtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/slotkv"
	"github.com/slotd/slotd/slotkv/kvclient"
)

// Cluster is slotd and its stores, running until Close.
type Cluster struct {
	// Slotd is slotd's gRPC address.
	Slotd string
	// Stores maps each store's node id (n1, n2, ...) to its gRPC address.
	Stores map[string]string

	dir     string
	stop    context.CancelFunc
	wg      sync.WaitGroup
	servers []*grpc.Server // the stores' gRPC servers, stopped first by Close
	closers []func()       // run in reverse order by Close
	errMu   sync.Mutex
	errs    []error // guarded by errMu: what the parts returned
}

// New is Start for a test: it fails t on error and closes the cluster when
// the test ends.
func New(t testing.TB, stores int) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, stores)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("kvtest: %v", err)
		}
	})
	return c
}

// Start runs slotd and stores n1..nN (at least one), bootstraps the
// directory with them and returns once every store has the first map.
func Start(ctx context.Context, stores int) (_ *Cluster, err error) {
	if stores < 1 {
		return nil, errors.New("kvtest: need at least one store")
	}
	dir, err := os.MkdirTemp("", "kvtest-")
	if err != nil {
		return nil, fmt.Errorf("kvtest: %w", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	c := &Cluster{Stores: map[string]string{}, dir: dir, stop: stop}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if err := c.startSlotd(ctx, runCtx); err != nil {
		return nil, err
	}

	// Listeners first: the bootstrap names every store's address.
	lis := make(map[string]net.Listener)
	var nodes []*slotdv1.Node
	for i := 1; i <= stores; i++ {
		id := "n" + strconv.Itoa(i)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("kvtest: store listener: %w", err)
		}
		c.closers = append(c.closers, func() { l.Close() })
		lis[id], c.Stores[id] = l, l.Addr().String()
		nodes = append(nodes, &slotdv1.Node{Id: id, Address: l.Addr().String()})
	}
	conn, err := grpc.NewClient(c.Slotd, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("kvtest: dial slotd: %w", err)
	}
	defer conn.Close()
	if _, err := slotdv1.NewAdminClient(conn).Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: nodes, Operator: "kvtest"}); err != nil {
		return nil, fmt.Errorf("kvtest: bootstrap: %w", err)
	}
	for i := 1; i <= stores; i++ {
		id := "n" + strconv.Itoa(i)
		if err := c.startStore(ctx, runCtx, id, lis[id]); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) startSlotd(ctx, runCtx context.Context) error {
	var lastErr error
	// The embedded etcd's ports are picked free and then bound: another
	// process may take one in between, so try again a few times.
	for attempt := range 3 {
		cfg := server.DefaultConfig()
		cfg.DataDir = fmt.Sprintf("%s/etcd-%d", c.dir, attempt)
		cfg.EtcdClientURL, cfg.EtcdPeerURL = freeAddr(), freeAddr()
		cfg.Listen, cfg.HTTP, cfg.Name, cfg.DisableMover = "127.0.0.1:0", "", "kvtest", true
		s, err := server.New(ctx, cfg)
		if err != nil {
			lastErr = err
			continue
		}
		c.closers = append(c.closers, s.Close)
		c.Slotd = s.GRPCAddr()
		c.goRun("slotd", func() error { return s.Run(runCtx) })
		return nil
	}
	return fmt.Errorf("kvtest: start slotd: %w", lastErr)
}

func (c *Cluster) startStore(ctx, runCtx context.Context, id string, lis net.Listener) error {
	sdk, err := client.New(ctx, client.Options{Endpoints: []string{c.Slotd},
		ReconnectBackoff: 10 * time.Millisecond, MaxReconnectBackoff: 100 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("kvtest: store %s: slot map: %w", id, err)
	}
	c.closers = append(c.closers, func() { sdk.Close() })
	srv, err := slotkv.Open(slotkv.Config{ID: id, DataDir: c.dir + "/" + id, Map: node.ClientMap{C: sdk},
		NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("kvtest: store %s: %w", id, err)
	}
	c.closers = append(c.closers, func() { srv.Close() })
	g := grpc.NewServer()
	srv.Register(g)
	c.servers = append(c.servers, g)
	c.goRun("store "+id, func() error { return srv.Run(runCtx) })
	c.goRun("store "+id+" gRPC", func() error { return g.Serve(lis) })
	return nil
}

// goRun runs a part until the cluster stops, keeping its error unless it
// is the stop itself.
func (c *Cluster) goRun(name string, run func() error) {
	c.wg.Go(func() {
		if err := run(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, grpc.ErrServerStopped) {
			c.errMu.Lock()
			c.errs = append(c.errs, fmt.Errorf("%s: %w", name, err))
			c.errMu.Unlock()
		}
	})
}

// Close stops the stores and slotd and removes their files. Shutdown order:
//  1. stop the stores' gRPC servers and cancel every Run (slotd shuts
//     down in its own order; stores stop their background work);
//  2. wait for every goroutine;
//  3. close the stores, their SDKs and slotd (its etcd last), in reverse
//     order of start, and remove the temporary directory.
//
// It returns what a part failed with while running.
func (c *Cluster) Close() error {
	for _, g := range c.servers {
		g.Stop()
	}
	c.stop()
	c.wg.Wait()
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.servers, c.closers = nil, nil
	os.RemoveAll(c.dir)
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return errors.Join(c.errs...)
}

// KV returns the SDK over the cluster's slotd and a KV client routed by
// it, both closed when the test ends.
func (c *Cluster) KV(t testing.TB) (*client.Client, *kvclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sdk, err := client.New(ctx, client.Options{Endpoints: []string{c.Slotd}})
	if err != nil {
		t.Fatal(err)
	}
	kv := kvclient.New(sdk)
	t.Cleanup(func() { kv.Close(); sdk.Close() })
	return sdk, kv
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}
