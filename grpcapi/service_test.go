package grpcapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/redirect"
	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

func TestWatchersSeeMapChange(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", nil)
	cs := []*client.Client{newClient(t, srv.addr()), newClient(t, srv.addr()), newClient(t, srv.addr())}

	to := otherThan(t, d, 42)
	v := moveSlot(t, d, 42, to)
	for i, c := range cs {
		eventually(t, "client sees the move", versionAtLeast(c, v))
		if got := c.Map().OwnerID(slots.MustNew(42)); got != to {
			t.Errorf("client %d: slot 42 owner %q at version %d, want %q", i, got, c.Map().Version(), to)
		}
	}
	if n := srv.svc.hub.Current().Version(); n < v {
		t.Errorf("hub at version %d, want >= %d", n, v)
	}
	m := srv.svc.dir.m
	if got := testutil.ToFloat64(m.watchers); got != 3 {
		t.Errorf("slotd_service_watchers %v, want 3", got)
	}
	if full, delta := testutil.ToFloat64(m.sends.WithLabelValues("full")), testutil.ToFloat64(m.sends.WithLabelValues("delta")); full < 3 || delta < 3 {
		t.Errorf("updates sent: %v full (want >= 3, one per watcher), %v delta (want >= 3)", full, delta)
	}
	if got := testutil.ToFloat64(srv.svc.hub.m.version); got < float64(v) {
		t.Errorf("slotd_service_map_version %v, want >= %d", got, v)
	}
}

func TestRestartedServerClientsCatchUp(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", nil)
	addr := srv.addr()
	c := newClient(t, addr)
	before := c.Map().Version()

	srv.stop()
	// The change happens while no slotd runs: the client learns it only
	// from the restarted server.
	to := otherThan(t, d, 7)
	v := moveSlot(t, d, 7, to)
	if c.Map().Version() != before {
		t.Fatalf("client moved to version %d with no server running", c.Map().Version())
	}
	startServer(t, d, addr, nil)
	eventually(t, "client catches up after the restart", versionAtLeast(c, v))
	if got := c.Map().OwnerID(slots.MustNew(7)); got != to {
		t.Errorf("slot 7 owner %q, want %q", got, to)
	}
}

func TestTwoServersOneEtcdFailover(t *testing.T) {
	e := etcdtest.New(t)
	d1, d2 := newDir(t, e), newDir(t, e)
	bootstrap(t, d1)
	s1 := startServer(t, d1, "127.0.0.1:0", nil)
	s2 := startServer(t, d2, "127.0.0.1:0", nil)

	// Both replicas serve the same map at the same version.
	ctx := testCtx(t)
	m1, err := slotdv1.NewDirectoryClient(dial(t, s1.addr())).GetMap(ctx, &slotdv1.GetMapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := slotdv1.NewDirectoryClient(dial(t, s2.addr())).GetMap(ctx, &slotdv1.GetMapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m1.GetVersion() != m2.GetVersion() || string(m1.GetMap().GetOwners()) != string(m2.GetMap().GetOwners()) {
		t.Fatalf("replicas differ: versions %d and %d", m1.GetVersion(), m2.GetVersion())
	}

	c := newClient(t, s1.addr(), s2.addr())
	s1.stop() // the client's first endpoint goes away
	to := otherThan(t, d2, 9)
	v := moveSlot(t, d2, 9, to)
	eventually(t, "client fails over and sees the move", versionAtLeast(c, v))
	if got := c.Map().OwnerID(slots.MustNew(9)); got != to {
		t.Errorf("slot 9 owner %q, want %q", got, to)
	}
}

func TestOlderRedirectDoesNotRollBack(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", nil)
	key := []byte("{user:42}:cart")
	s := slots.ForKey(key)
	eventually(t, "hub has the map", func() bool { return srv.svc.hub.Current() != nil })
	old := srv.svc.hub.Current()
	oldOwner := old.OwnerID(s)
	to := otherThan(t, d, s.Int())
	v := moveSlot(t, d, s.Int(), to)

	c := newClient(t, srv.addr())
	eventually(t, "client at the new version", versionAtLeast(c, v))
	oldNode, _ := old.Node(oldOwner)
	// A store still on the old map keeps answering MOVED to the old owner
	// with its older version.
	stale := redirect.Redirect{Kind: redirect.Moved, Slot: s, Owner: oldOwner, Addr: oldNode.Addr, Version: old.Version()}
	calls := 0
	err := c.Do(testCtx(t), key, func(ctx context.Context, addr string, asking bool) error {
		calls++
		return stale.Err()
	})
	if !errors.Is(err, client.ErrTooManyRedirects) {
		t.Fatalf("Do: %v, want ErrTooManyRedirects", err)
	}
	if calls == 0 || calls > 5 {
		t.Errorf("Do sent %d requests, want 1-5", calls)
	}
	// A refresh from the real server does not move the map back either.
	if err := c.Refresh(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	m := c.Map()
	if m.Version() < v || m.OwnerID(s) != to {
		t.Errorf("map at version %d with slot %d on %q; want >= %d on %q", m.Version(), s.Int(), m.OwnerID(s), v, to)
	}
}

func TestBadRequests(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", nil)
	conn := dial(t, srv.addr())
	dc, ac := slotdv1.NewDirectoryClient(conn), slotdv1.NewAdminClient(conn)
	ctx := testCtx(t)
	before, err := d.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		code codes.Code
		msg  string // part of the message
	}{
		{"lookup slot 99999", func() error {
			_, err := dc.Lookup(ctx, &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Slot{Slot: 99999}})
			return err
		}, codes.InvalidArgument, "slot 99999 is out of range 0-16383"},
		{"lookup empty key", func() error {
			_, err := dc.Lookup(ctx, &slotdv1.LookupRequest{Target: &slotdv1.LookupRequest_Key{Key: nil}})
			return err
		}, codes.InvalidArgument, "key is empty"},
		{"lookup nothing", func() error {
			_, err := dc.Lookup(ctx, &slotdv1.LookupRequest{})
			return err
		}, codes.InvalidArgument, "pass a key or a slot"},
		{"drain unknown node", func() error {
			_, err := ac.DrainNode(ctx, &slotdv1.DrainNodeRequest{NodeId: "nosuch"})
			return err
		}, codes.NotFound, `node "nosuch" is not registered`},
		{"weight of unknown node", func() error {
			_, err := ac.SetWeight(ctx, &slotdv1.SetWeightRequest{NodeId: "nosuch", Weight: 2})
			return err
		}, codes.NotFound, `node "nosuch" is not registered`},
		{"weight 0", func() error {
			_, err := ac.SetWeight(ctx, &slotdv1.SetWeightRequest{NodeId: "a", Weight: 0})
			return err
		}, codes.InvalidArgument, "weight 0"},
		{"bad node id", func() error {
			_, err := ac.DrainNode(ctx, &slotdv1.DrainNodeRequest{NodeId: "../etc"})
			return err
		}, codes.InvalidArgument, "node id"},
		{"move slot 99999", func() error {
			_, err := ac.Move(ctx, &slotdv1.MoveRequest{Slot: 99999, To: "a"})
			return err
		}, codes.InvalidArgument, "slot 99999 is out of range"},
		{"move to unknown node", func() error {
			_, err := ac.Move(ctx, &slotdv1.MoveRequest{Slot: 1, To: "nosuch"})
			return err
		}, codes.NotFound, `node "nosuch" is not registered`},
		{"unknown plan", func() error {
			_, err := ac.GetPlan(ctx, &slotdv1.GetPlanRequest{PlanId: "nosuch"})
			return err
		}, codes.NotFound, `no plan "nosuch"`},
		{"apply without plan id", func() error {
			_, err := ac.Apply(ctx, &slotdv1.ApplyRequest{})
			return err
		}, codes.InvalidArgument, "plan id is empty"},
		{"plan draining unknown node", func() error {
			_, err := ac.Plan(ctx, &slotdv1.PlanRequest{Drain: []string{"nosuch"}})
			return err
		}, codes.NotFound, "nosuch"},
		{"submit malformed plan", func() error {
			_, err := ac.SubmitPlan(ctx, &slotdv1.SubmitPlanRequest{Plan: &slotdv1.Plan{Id: "p1", Moves: []*slotdv1.PlannedMove{{Slot: 20000, From: "a", To: "b"}}}})
			return err
		}, codes.InvalidArgument, "slot 20000 out of range"},
		{"bootstrap twice", func() error {
			_, err := ac.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: []*slotdv1.Node{{Id: "x", Address: "127.0.0.1:1"}}})
			return err
		}, codes.AlreadyExists, "already bootstrapped"},
		{"remove node that owns slots", func() error {
			_, err := ac.RemoveNode(ctx, &slotdv1.RemoveNodeRequest{NodeId: "a"})
			return err
		}, codes.FailedPrecondition, "still owns"},
		{"per-node throttle", func() error {
			_, err := ac.SetThrottle(ctx, &slotdv1.SetThrottleRequest{BytesPerSecond: 1, NodeId: "a"})
			return err
		}, codes.InvalidArgument, "per-node"},
		{"heartbeat of unknown node", func() error {
			_, err := ac.Heartbeat(ctx, &slotdv1.HeartbeatRequest{NodeId: "nosuch"})
			return err
		}, codes.NotFound, "not registered"},
		{"register without address", func() error {
			_, err := ac.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "z"}})
			return err
		}, codes.InvalidArgument, "address"},
		{"history limit too large", func() error {
			_, err := ac.History(ctx, &slotdv1.HistoryRequest{Limit: 1 << 30})
			return err
		}, codes.InvalidArgument, "limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			st, _ := status.FromError(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Errorf("got %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
			if strings.Contains(st.Message(), "\n") {
				t.Errorf("message spans lines: %q", st.Message())
			}
		})
	}
	// Bad input changes nothing.
	after, err := d.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("version went from %d to %d after bad requests", before, after)
	}
}
