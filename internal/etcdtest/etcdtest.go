package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/slotd/slotd/internal/backoff"
)

// startAttempts bounds how often New retries when a port it picked was taken
// by another process between picking and binding (other test binaries run on
// the same machine at the same time).
const startAttempts = 5

// readyTimeout bounds the wait for the member to be ready to serve.
const readyTimeout = 30 * time.Second

// Option changes how New starts the member.
type Option func(*options)

type options struct {
	fsync bool
}

// WithFsync makes the member fsync its WAL and backend like a production
// member. By default tests skip fsync (UnsafeNoFsync): it makes no difference
// to a process that is closed gracefully, and fsync on a shared test machine
// is slow and noisy. Benchmarks that claim production latencies should use it.
func WithFsync() Option { return func(o *options) { o.fsync = true } }

// Cluster is one embedded etcd member with a client connected to it. Its
// methods are safe for concurrent use, except Restart, which must not race
// with itself.
type Cluster struct {
	dir       string
	clientURL url.URL
	peerURL   url.URL
	opts      options

	mu      sync.Mutex // guards etcd and clients
	etcd    *embed.Etcd
	clients []*clientv3.Client
}

// New starts an embedded single-member etcd on free 127.0.0.1 ports with its
// data in t.TempDir(), waits until it serves, and stops it (and every client
// made by Client or NewClient) when the test ends. It fails the test if the
// member cannot start.
func New(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{dir: t.TempDir()}
	for _, o := range opts {
		o(&c.opts)
	}
	var lastErr error
	for range startAttempts {
		cu, pu, err := freeURLs()
		if err != nil {
			t.Fatalf("etcdtest: pick ports: %v", err)
		}
		c.clientURL, c.peerURL = cu, pu
		e, err := c.start()
		if err == nil {
			c.etcd = e
			lastErr = nil
			break
		}
		lastErr = err
		if !isAddrInUse(err) {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("etcdtest: start embedded etcd: %v", lastErr)
	}
	// Shutdown order: 1. clients, so that no call is in flight against a
	// closing server; 2. the member.
	t.Cleanup(c.close)
	return c
}

// Endpoints returns the client URLs of the member, for clientv3.Config or
// for a process started by an e2e test.
func (c *Cluster) Endpoints() []string { return []string{c.clientURL.String()} }

// DataDir returns the member's data directory.
func (c *Cluster) DataDir() string { return c.dir }

// Client returns a client shared by every caller of Client on this Cluster.
// It is closed when the test ends; callers must not close it.
func (c *Cluster) Client() *clientv3.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.clients) == 0 {
		cli, err := c.newClientLocked()
		if err != nil {
			// clientv3.New does not dial eagerly, so this only fails on a
			// bad configuration, which is a bug in this package.
			panic(fmt.Sprintf("etcdtest: new client: %v", err))
		}
		c.clients = append(c.clients, cli)
	}
	return c.clients[0]
}

// NewClient returns a new client of its own (its own gRPC connection), for
// tests that simulate several processes. It is closed when the test ends.
func (c *Cluster) NewClient(t testing.TB) *clientv3.Client {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.clients) == 0 {
		// Keep clients[0] as the shared client of Client.
		cli, err := c.newClientLocked()
		if err != nil {
			t.Fatalf("etcdtest: new client: %v", err)
		}
		c.clients = append(c.clients, cli)
	}
	cli, err := c.newClientLocked()
	if err != nil {
		t.Fatalf("etcdtest: new client: %v", err)
	}
	c.clients = append(c.clients, cli)
	return cli
}

func (c *Cluster) newClientLocked() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// Restart stops the member and starts it again on the same data directory
// and ports, so that existing clients reconnect by themselves. It fails the
// test if the member does not come back.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.etcd.Close()
	var err error
	// The ports were ours a moment ago; another process grabbing one in
	// between is unlikely but possible, so retry briefly before failing.
	bo := backoff.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for range startAttempts {
		var e *embed.Etcd
		e, err = c.start()
		if err == nil {
			c.etcd = e
			return
		}
		if !isAddrInUse(err) {
			break
		}
		bo.Sleep(context.Background())
	}
	t.Fatalf("etcdtest: restart embedded etcd: %v", err)
}

// Compact compacts the keyspace up to the current revision and returns that
// revision; watches started at an older revision then fail with
// ErrCompacted. It fails the test on error.
func (c *Cluster) Compact(t testing.TB) int64 {
	t.Helper()
	cli := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "compaction-probe")
	if err != nil {
		t.Fatalf("etcdtest: read revision: %v", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("etcdtest: compact to %d: %v", rev, err)
	}
	return rev
}

func (c *Cluster) start() (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = c.dir
	cfg.ListenClientUrls = []url.URL{c.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{c.clientURL}
	cfg.ListenPeerUrls = []url.URL{c.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{c.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if os.Getenv("ETCDTEST_LOG") != "" {
		cfg.LogLevel = "error"
		cfg.LogOutputs = []string{"stderr"}
	} else {
		// etcd logs errors for the listeners it closes on the way down;
		// start failures come back from StartEtcd anyway.
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	}
	cfg.UnsafeNoFsync = !c.opts.fsync
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("member failed before ready: %w", err)
	case <-time.After(readyTimeout):
		e.Close()
		return nil, fmt.Errorf("member not ready after %v", readyTimeout)
	}
}

func (c *Cluster) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cli := range c.clients {
		_ = cli.Close()
	}
	c.clients = nil
	if c.etcd != nil {
		c.etcd.Close()
		c.etcd = nil
	}
}

// freeURLs returns a client and a peer URL on ports the kernel reported free.
func freeURLs() (client, peer url.URL, err error) {
	var ports [2]int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	// Hold both listeners open together so the two ports differ.
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, url.URL{}, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	client = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peer = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	return client, peer, nil
}

func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}
