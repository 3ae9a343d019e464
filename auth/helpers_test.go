package auth_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/internal/waitfor"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Test policy over the health service: Check stands in for an admin method
// (apply, drain, throttle), Watch for a read method and a stream.
const (
	adminMethod = "/grpc.health.v1.Health/Check"
	readMethod  = "/grpc.health.v1.Health/Watch"
)

func testPolicy() *auth.Policy {
	return auth.NewPolicy().
		Require(adminMethod, auth.RoleAdmin).
		Require(readMethod, auth.RoleRead).
		Require("/grpc.health.v1.Health/List", auth.RoleRead)
}

// countingHealth counts handler calls, to prove refused calls never reach
// the handler, and records who the interceptor said the caller was.
type countingHealth struct {
	*health.Server
	checks, watches atomic.Int64

	mu     sync.Mutex // guards caller
	caller string
}

func (h *countingHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.checks.Add(1)
	h.mu.Lock()
	h.caller = auth.Operator(ctx)
	h.mu.Unlock()
	return h.Server.Check(ctx, req)
}

func (h *countingHealth) Watch(req *healthpb.HealthCheckRequest, s grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	h.watches.Add(1)
	return h.Server.Watch(req, s)
}

func (h *countingHealth) lastCaller() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.caller
}

type testServer struct {
	addr   string
	health *countingHealth
}

// startServer serves countingHealth on 127.0.0.1 with creds (nil: plaintext)
// and the given options; it stops when the test ends.
func startServer(t *testing.T, creds credentials.TransportCredentials, opts ...grpc.ServerOption) *testServer {
	t.Helper()
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	srv := grpc.NewServer(opts...)
	h := &countingHealth{Server: health.NewServer()}
	healthpb.RegisterHealthServer(srv, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		// Shutdown order: 1. health stops its watches, so Stop does not wait
		// on them; 2. the server; 3. the Serve goroutine.
		h.Shutdown()
		srv.Stop()
		<-done
	})
	return &testServer{addr: ln.Addr().String(), health: h}
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// callCheck calls the admin stand-in.
func callCheck(c healthpb.HealthClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// callWatch opens the read stand-in stream and waits for its first message.
func callWatch(c healthpb.HealthClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	waitfor.Err(t, 20*time.Second, what, cond)
}
