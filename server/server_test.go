package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotd/slotd/internal/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidateNamesTheFlag(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no listen", func(c *Config) { c.Listen = "" }, "--listen"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "--data-dir"},
		{"no data dir, external etcd", func(c *Config) { c.DataDir, c.EtcdEndpoints = "", []string{"http://e:2379"} }, ""},
		{"token without TLS", func(c *Config) { c.TokenFile = "t" }, "--token-file needs --tls-cert"},
		{"node identity without identities", func(c *Config) { c.RequireNodeIdentity = true }, "--require-node-identity"},
		{"embedded etcd CA alone", func(c *Config) { c.EtcdTLSCA = "ca.pem" }, "--etcd-tls-cert"},
		{"zero request timeout", func(c *Config) { c.RequestTimeout = 0 }, "--request-timeout"},
		{"negative hold-down", func(c *Config) { c.HoldDown = -time.Second }, "--hold-down"},
		{"negative max recv", func(c *Config) { c.MaxRecvBytes = -1 }, "--max-recv-bytes"},
		{"parallelism 0", func(c *Config) { c.MoveParallelism = 0 }, "--move-parallelism 0"},
		{"prefix without its slashes", func(c *Config) { c.EtcdPrefix = "slotd" }, "--etcd-prefix"},
		{"prefix with an empty segment", func(c *Config) { c.EtcdPrefix = "/a//b/" }, "--etcd-prefix"},
		{"another prefix", func(c *Config) { c.EtcdPrefix = "/clusters/eu-1/" }, ""},
		{"CA without certificate", func(c *Config) { c.TLSCA = "ca.pem" }, "--tls-ca and --client-auth need --tls-cert"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate: %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
}

// TestNewCloseWithoutRun: a server built and closed without serving
// releases its listeners and leaves no goroutine behind (TestMain).
func TestNewCloseWithoutRun(t *testing.T) {
	e := etcdtest.New(t)
	c := DefaultConfig()
	c.EtcdEndpoints, c.Listen, c.HTTP = e.Endpoints(), "127.0.0.1:0", "127.0.0.1:0"
	s, err := New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	addr, haddr := s.GRPCAddr(), s.HTTPAddr()
	if addr == "" || haddr == "" || s.ClusterID() == "" || len(s.EtcdEndpoints()) == 0 {
		t.Fatalf("getters: grpc %q http %q cluster %q etcd %v", addr, haddr, s.ClusterID(), s.EtcdEndpoints())
	}
	s.Close()
	s.Close() // idempotent
	if err := s.Run(context.Background()); err == nil {
		t.Error("Run after Close returned nil")
	}
	for _, a := range []string{addr, haddr} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s still bound after Close: %v", a, err)
			continue
		}
		l.Close()
	}
}

// TestRunStopsWithContext: Run serves until its context ends, then stops
// cleanly; the embedded etcd is used without EtcdEndpoints.
func TestRunStopsWithContext(t *testing.T) {
	c := DefaultConfig()
	c.DataDir, c.Listen, c.HTTP, c.Name = t.TempDir(), "127.0.0.1:0", "", "r1"
	c.EtcdClientURL, c.EtcdPeerURL = freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	conn, err := net.Dial("tcp", s.GRPCAddr())
	if err != nil {
		t.Fatalf("dial gRPC: %v", err)
	}
	conn.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestUnreachableEtcdNamed: an etcd that does not answer is named in the
// error, with what to check.
func TestUnreachableEtcdNamed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	cfg := DefaultConfig()
	cfg.EtcdEndpoints = []string{"http://" + dead}
	cfg.Listen, cfg.HTTP = "127.0.0.1:0", ""
	cfg.RequestTimeout = time.Second
	_, err = New(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "etcd at http://"+dead+" did not answer") {
		t.Fatalf("New over a dead etcd: %v", err)
	}
}
