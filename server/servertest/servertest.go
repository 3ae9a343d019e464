// Package servertest starts slotd in-process for tests: the server package
// (the same code cmd/slotd runs) on 127.0.0.1 ports over a real embedded etcd
// (internal/etcdtest), stopped when the test ends, with helpers to dial it.
//
// Usage:
//
//	s := servertest.Start(t)                        // plaintext, no HTTP, mover on
//	admin := slotdv1.NewAdminClient(s.Dial(t))
//	c := s.Client(t, client.Options{})             // the SDK, following the map
//	s = servertest.Start(t, func(c *server.Config) { c.DisableMover = true })
package servertest

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/server"
)

// Slotd is a running in-process slotd.
type Slotd struct {
	*server.Server
	etcd   *etcdtest.Cluster
	prefix string
}

// Start runs slotd over a fresh etcd until the test ends. Its defaults:
// gRPC on a free 127.0.0.1 port, no HTTP listener, name "s1", no log; edits
// change the configuration before it starts (TLS files, DisableMover,
// TuneMover, a Logger...). A failure to start fails the test.
func Start(t testing.TB, edits ...func(*server.Config)) *Slotd {
	t.Helper()
	return StartOn(t, etcdtest.New(t), edits...)
}

// StartOn is Start over an etcd the test already runs (several slotds, or
// several clusters under different prefixes, on one etcd).
func StartOn(t testing.TB, e *etcdtest.Cluster, edits ...func(*server.Config)) *Slotd {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.EtcdEndpoints = e.Endpoints()
	cfg.Listen = "127.0.0.1:0"
	cfg.HTTP = ""
	cfg.Name = "s1"
	for _, edit := range edits {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatalf("servertest: start slotd: %v", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("servertest: slotd stopped with %v", err)
		}
		srv.Close()
	})
	return &Slotd{Server: srv, etcd: e, prefix: cfg.EtcdPrefix}
}

// Addr is the gRPC address.
func (s *Slotd) Addr() string { return s.GRPCAddr() }

// Etcd is the etcd slotd runs over.
func (s *Slotd) Etcd() *etcdtest.Cluster { return s.etcd }

// Directory returns a directory over slotd's etcd, on a client of its own,
// for tests that check what slotd stored.
func (s *Slotd) Directory(t testing.TB) *directory.Directory {
	t.Helper()
	d, err := directory.New(directory.Config{Client: s.etcd.NewClient(t), Prefix: s.prefix})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Dial connects to slotd's gRPC API, closed when the test ends; with no
// options, in plaintext.
func (s *Slotd) Dial(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(s.Addr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Client returns the SDK following slotd's map (opts.Endpoints is set to
// slotd), closed when the test ends. It blocks until the first map, so
// bootstrap the directory first.
func (s *Slotd) Client(t testing.TB, opts client.Options) *client.Client {
	t.Helper()
	opts.Endpoints = []string{s.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
