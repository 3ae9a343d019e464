package replicas

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/slotd/slotd/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs a gRPC health server on a free 127.0.0.1 port until stop.
func serve(t *testing.T) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(lis) }()
	return lis.Addr().String(), func() { g.Stop(); <-done }
}

func TestDialUsesAnyReplica(t *testing.T) {
	a, stopA := serve(t)
	b, stopB := serve(t)
	defer stopB()
	cc, err := Dial("test", []string{a, b}, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	check := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		return err
	}
	if err := check(); err != nil {
		t.Fatalf("with both replicas up: %v", err)
	}
	stopA()
	// A call that was on the stopped replica's connection fails with
	// Unavailable, as any call to a server that goes away does (callers
	// retry); the next ones go through the other replica.
	waitfor.Err(t, 10*time.Second, "a call through the remaining replica", check)
	for i := range 5 {
		if err := check(); err != nil {
			t.Fatalf("call %d after one replica stopped: %v", i, err)
		}
	}
}

func TestDialRefusesBadEndpoints(t *testing.T) {
	for _, eps := range [][]string{nil, {"127.0.0.1"}, {"127.0.0.1:7400", "nohostport"}} {
		if cc, err := Dial("test", eps); !errors.Is(err, ErrBadEndpoint) {
			if cc != nil {
				cc.Close()
			}
			t.Errorf("Dial(%q): %v, want ErrBadEndpoint", eps, err)
		}
	}
}
