package grpcapi

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/tlsconf"
)

// tlsClient dials addr over TLS with the given client certificate (none
// when cert is empty).
func tlsClient(t *testing.T, set devca.Set, addr, cert, key string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: cert, KeyFile: key, CAFile: set.CA})
	if err != nil {
		t.Fatal(err)
	}
	return dial(t, addr, append([]grpc.DialOption{grpc.WithTransportCredentials(tc.Credentials())}, opts...)...)
}

func TestTLSAndRoles(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	tcfg := tlsconf.Config{CertFile: set.ServerCert, KeyFile: set.ServerKey, CAFile: set.CA}
	ts, err := tlsconf.NewServer(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	az, err := auth.New(auth.Config{Policy: Policy(), ClientCerts: tcfg.VerifiesClientCerts(), TokenFile: set.TokenFile})
	if err != nil {
		t.Fatal(err)
	}
	opts := append(az.ServerOptions(), grpc.Creds(ts.Credentials()))
	srv := startServer(t, d, "127.0.0.1:0", func(c *Config) { c.Authenticated = true }, opts...)
	if m := Policy().Uncovered(srv.srv.GetServiceInfo()); len(m) > 0 {
		t.Fatalf("policy leaves %v uncovered", m)
	}
	ctx := testCtx(t)
	before, err := d.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("plaintext client refused", func(t *testing.T) {
		conn := dial(t, srv.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := slotdv1.NewDirectoryClient(conn).GetMap(cctx, &slotdv1.GetMapRequest{})
		if c := status.Code(err); c != codes.Unavailable {
			t.Errorf("plaintext GetMap: %v, want Unavailable (no TLS handshake)", err)
		}
	})

	read := tlsClient(t, set, srv.addr(), set.ReadCert, set.ReadKey)
	ra := slotdv1.NewAdminClient(read)
	t.Run("read role reads", func(t *testing.T) {
		if _, err := slotdv1.NewDirectoryClient(read).GetMap(ctx, &slotdv1.GetMapRequest{}); err != nil {
			t.Errorf("GetMap: %v", err)
		}
		if _, err := ra.Status(ctx, &slotdv1.StatusRequest{}); err != nil {
			t.Errorf("Status: %v", err)
		}
		if _, err := slotdv1.NewAutoClient(read).Status(ctx, &slotdv1.AutoStatusRequest{}); err != nil {
			t.Errorf("Auto.Status: %v", err)
		}
	})
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"apply", func() error { _, err := ra.Apply(ctx, &slotdv1.ApplyRequest{PlanId: "p"}); return err }},
		{"drain", func() error { _, err := ra.DrainNode(ctx, &slotdv1.DrainNodeRequest{NodeId: "a"}); return err }},
		{"undrain", func() error { _, err := ra.UndrainNode(ctx, &slotdv1.UndrainNodeRequest{NodeId: "a"}); return err }},
		{"throttle", func() error {
			_, err := ra.SetThrottle(ctx, &slotdv1.SetThrottleRequest{BytesPerSecond: 1})
			return err
		}},
		{"auto on", func() error {
			on := true
			_, err := slotdv1.NewAutoClient(read).SetPolicy(ctx, &slotdv1.SetAutoPolicyRequest{Enabled: &on})
			return err
		}},
		{"register", func() error {
			_, err := ra.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "z", Address: "127.0.0.1:1"}})
			return err
		}},
	} {
		t.Run("read role refused "+tc.name, func(t *testing.T) {
			if c := status.Code(tc.call()); c != codes.PermissionDenied {
				t.Errorf("got %v, want PermissionDenied", c)
			}
		})
	}
	t.Run("SDK watches with a read certificate", func(t *testing.T) {
		tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: set.ReadCert, KeyFile: set.ReadKey, CAFile: set.CA})
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		c, err := client.New(cctx, client.Options{Endpoints: []string{srv.addr()},
			DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(tc.Credentials())}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.Map().Version() < before {
			t.Errorf("SDK map at version %d, want >= %d", c.Map().Version(), before)
		}
	})
	t.Run("no certificate no token", func(t *testing.T) {
		conn := tlsClient(t, set, srv.addr(), "", "")
		_, err := slotdv1.NewAdminClient(conn).DrainNode(ctx, &slotdv1.DrainNodeRequest{NodeId: "a"})
		if c := status.Code(err); c != codes.Unauthenticated {
			t.Errorf("got %v, want Unauthenticated", err)
		}
	})
	after, err := d.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("refused calls changed the directory: version %d -> %d", before, after)
	}

	t.Run("admin token drains, history names it", func(t *testing.T) {
		tok, err := auth.NewTokenCredentials(set.AdminToken, false)
		if err != nil {
			t.Fatal(err)
		}
		conn := tlsClient(t, set, srv.addr(), "", "", grpc.WithPerRPCCredentials(tok))
		ac := slotdv1.NewAdminClient(conn)
		// The operator field is a claim; the identity wins.
		resp, err := ac.DrainNode(ctx, &slotdv1.DrainNodeRequest{NodeId: "c", Operator: "mallory"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetNode().GetState() != slotdv1.NodeState_NODE_STATE_DRAINING {
			t.Errorf("node state %v, want DRAINING", resp.GetNode().GetState())
		}
		h, err := ac.History(ctx, &slotdv1.HistoryRequest{SinceVersion: before, NodeId: "c"})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.GetEntries()) != 1 || h.GetEntries()[0].GetOperator() == "mallory" || h.GetEntries()[0].GetOperator() == "" {
			t.Errorf("history %v: want one entry whose operator is the token's name", h.GetEntries())
		}
	})
	t.Run("store certificate registers and heartbeats", func(t *testing.T) {
		sa := slotdv1.NewAdminClient(tlsClient(t, set, srv.addr(), set.StoreCert, set.StoreKey))
		reg, err := sa.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: "d", Address: "127.0.0.1:7004"}})
		if err != nil {
			t.Fatal(err)
		}
		if reg.GetSession() == "" || reg.GetHeartbeatInterval().AsDuration() <= 0 {
			t.Errorf("register: session %q interval %v", reg.GetSession(), reg.GetHeartbeatInterval().AsDuration())
		}
		if _, err := sa.Heartbeat(ctx, &slotdv1.HeartbeatRequest{NodeId: "d", Session: reg.GetSession(), LeaseId: reg.GetLeaseId()}); err != nil {
			t.Errorf("heartbeat: %v", err)
		}
		if _, err := sa.SetThrottle(ctx, &slotdv1.SetThrottleRequest{BytesPerSecond: 1}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("store SetThrottle: %v, want PermissionDenied", err)
		}
	})
}
