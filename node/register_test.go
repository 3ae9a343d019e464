package node

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/internal/waitfor"
)

// flakyAdmin is a slotd Admin server that is unreachable for its first
// registrations and expires the session after a few heartbeats.
type flakyAdmin struct {
	slotdv1.UnimplementedAdminServer
	mu              sync.Mutex // guards the counters
	failFirst       int
	registrations   int
	heartbeats      int
	expireAfter     int
	lastNode        *slotdv1.Node
	sessionsExpired int
	calls           []*slotdv1.RegisterNodeRequest // every registration, failed ones too
}

func (a *flakyAdmin) RegisterNode(ctx context.Context, req *slotdv1.RegisterNodeRequest) (*slotdv1.RegisterNodeResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, req)
	if a.failFirst > 0 {
		a.failFirst--
		return nil, status.Error(codes.Unavailable, "etcd unreachable")
	}
	a.registrations++
	a.heartbeats = 0
	a.lastNode = req.GetNode()
	n := *req.GetNode()
	n.State = slotdv1.NodeState_NODE_STATE_ACTIVE
	return &slotdv1.RegisterNodeResponse{Node: &n, Version: 5, Session: "s", HeartbeatInterval: durationpb.New(5 * time.Millisecond)}, nil
}

func (a *flakyAdmin) Heartbeat(ctx context.Context, req *slotdv1.HeartbeatRequest) (*slotdv1.HeartbeatResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.heartbeats++
	if a.heartbeats > a.expireAfter {
		a.sessionsExpired++
		return nil, status.Error(codes.NotFound, "session expired")
	}
	return &slotdv1.HeartbeatResponse{State: slotdv1.NodeState_NODE_STATE_ACTIVE, Version: 6}, nil
}

func (a *flakyAdmin) counts() (regs, expired int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.registrations, a.sessionsExpired
}

// TestRegistrarRetriesAndReregisters: registration is retried while slotd
// fails, heartbeats keep the session, and an expired session leads to a new
// registration.
func TestRegistrarRetriesAndReregisters(t *testing.T) {
	admin := &flakyAdmin{failFirst: 3, expireAfter: 3}
	client := serveAdmin(t, admin)

	r, err := NewRegistrar(RegistrarConfig{
		Admin:      client,
		Node:       &slotdv1.Node{Id: "kv-1", Address: "127.0.0.1:7500", Zone: "z1", Weight: 2},
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitfor.Err(t, 20*time.Second, "a second registration after an expired session", func() error {
		if regs, expired := admin.counts(); regs < 2 || expired < 1 {
			return fmt.Errorf("registrations %d, expired sessions %d", regs, expired)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	admin.mu.Lock()
	n := admin.lastNode
	calls := admin.calls
	admin.mu.Unlock()
	if n.GetId() != "kv-1" || n.GetAddress() != "127.0.0.1:7500" || n.GetZone() != "z1" || n.GetWeight() != 2 {
		t.Fatalf("registered %v", n)
	}
	// Every registration names this process and numbers its attempt, so
	// slotd can tell one that arrives late from the one that holds the lease.
	for i, c := range calls {
		if c.GetIncarnation() == "" || c.GetIncarnation() != calls[0].GetIncarnation() || c.GetAttempt() != uint64(i+1) {
			t.Fatalf("registration %d named incarnation %q attempt %d, want %q and %d", i+1, c.GetIncarnation(), c.GetAttempt(), calls[0].GetIncarnation(), i+1)
		}
	}
	if _, err := NewRegistrar(RegistrarConfig{Admin: client, Node: &slotdv1.Node{Id: "x"}}); err == nil {
		t.Fatal("a node without an address was accepted")
	}
}

// leaseAdmin grants one lease (id 7, an hour) and refuses everything after:
// renewals with NOT_FOUND (the lease is gone), registrations as unavailable.
type leaseAdmin struct {
	slotdv1.UnimplementedAdminServer
	mu       sync.Mutex // guards the fields below
	regs     int
	renewals []int64 // lease ids the heartbeats named
}

func (a *leaseAdmin) RegisterNode(ctx context.Context, req *slotdv1.RegisterNodeRequest) (*slotdv1.RegisterNodeResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.regs++
	if a.regs > 1 {
		return nil, status.Error(codes.Unavailable, "slotd is restarting")
	}
	return &slotdv1.RegisterNodeResponse{Node: req.GetNode(), Version: 3, LeaseId: 7, Ttl: durationpb.New(time.Hour),
		LeaseMargin: durationpb.New(time.Minute), HeartbeatInterval: durationpb.New(5 * time.Millisecond)}, nil
}

func (a *leaseAdmin) Heartbeat(ctx context.Context, req *slotdv1.HeartbeatRequest) (*slotdv1.HeartbeatResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.renewals = append(a.renewals, req.GetLeaseId())
	return nil, status.Error(codes.NotFound, "lease 7 is not the node's current lease")
}

// TestRegistrarDropsLostLease: the registration's lease holds; a renewal
// slotd refuses drops it at once (the node may have been declared failed),
// and it stays dropped while no registration succeeds.
func TestRegistrarDropsLostLease(t *testing.T) {
	admin := &leaseAdmin{}
	client := serveAdmin(t, admin)
	lease := NewLease("kv-1", nil, nil)
	var required atomic.Uint64
	r, err := NewRegistrar(RegistrarConfig{
		Admin: client, Node: &slotdv1.Node{Id: "kv-1", Address: "127.0.0.1:7500"},
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Lease: lease,
		OnRegistered: func(v uint64) {
			required.Store(v)
			if lease.Check() == nil {
				t.Error("the lease held before the registration's map version was required")
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitfor.Err(t, 20*time.Second, "a refused renewal and a refused registration after it", func() error {
		admin.mu.Lock()
		defer admin.mu.Unlock()
		if len(admin.renewals) < 1 || admin.regs < 2 {
			return fmt.Errorf("renewals %v, registrations %d", admin.renewals, admin.regs)
		}
		return nil
	})
	if !lease.SelfFenced() {
		t.Fatal("the lease still holds after slotd refused its renewal (an hour's TTL was granted)")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	admin.mu.Lock()
	defer admin.mu.Unlock()
	if admin.renewals[0] != 7 || required.Load() != 3 {
		t.Fatalf("renewed lease %d, required map version %d; want 7 and 3", admin.renewals[0], required.Load())
	}
}

// serveAdmin serves admin on 127.0.0.1 for the test and returns a client.
func serveAdmin(t *testing.T, admin slotdv1.AdminServer) slotdv1.AdminClient {
	t.Helper()
	return slotdv1.NewAdminClient(serveTest(t, func(g *grpc.Server) { slotdv1.RegisterAdminServer(g, admin) }))
}

// serveTest serves what register puts on a gRPC server on 127.0.0.1 until
// the test ends, and returns a connection to it.
func serveTest(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	register(g)
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		<-served
	})
	return conn
}
