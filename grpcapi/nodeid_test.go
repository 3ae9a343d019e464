package grpcapi

import (
	"net"
	"net/url"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/tlsconf"
)

// TestNodeIdentity: a store certificate bound to a node id (URI SAN
// spiffe://slotd/node/<id>) registers and heartbeats as that node only;
// with --require-node-identity an unbound store certificate is refused;
// admin certificates register any node. Real TLS over 127.0.0.1; a refused
// call changes nothing.
func TestNodeIdentity(t *testing.T) {
	dir := t.TempDir()
	ca, err := devca.NewCA("node identity test CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := devca.WriteFileAtomic(caFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	issue := func(name string, l devca.Leaf) (cert, key string) {
		t.Helper()
		kp, err := ca.Issue(l)
		if err != nil {
			t.Fatal(err)
		}
		cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if err := kp.WriteFiles(cert, key); err != nil {
			t.Fatal(err)
		}
		return cert, key
	}
	uris := func(items ...string) []*url.URL {
		var us []*url.URL
		for _, it := range items {
			u, err := url.Parse("spiffe://" + auth.DefaultTrustDomain + "/" + it)
			if err != nil {
				t.Fatal(err)
			}
			us = append(us, u)
		}
		return us
	}
	srvCert, srvKey := issue("server", devca.Leaf{CommonName: "slotd", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	bound := [2]string{}
	bound[0], bound[1] = issue("store-a", devca.Leaf{CommonName: "store-a", URIs: uris("role/store", "node/na"), Client: true})
	unbound := [2]string{}
	unbound[0], unbound[1] = issue("store", devca.Leaf{CommonName: "store", URIs: uris("role/store"), Client: true})
	admin := [2]string{}
	admin[0], admin[1] = issue("admin", devca.Leaf{CommonName: "admin", URIs: uris("role/admin"), Client: true})

	for _, require := range []bool{false, true} {
		t.Run(map[bool]string{false: "bound identities only", true: "required"}[require], func(t *testing.T) {
			d := newDir(t, etcdtest.New(t))
			bootstrap(t, d)
			tcfg := tlsconf.Config{CertFile: srvCert, KeyFile: srvKey, CAFile: caFile}
			ts, err := tlsconf.NewServer(tcfg)
			if err != nil {
				t.Fatal(err)
			}
			az, err := auth.New(auth.Config{Policy: Policy(), ClientCerts: tcfg.VerifiesClientCerts(), RequireNodeIdentity: require})
			if err != nil {
				t.Fatal(err)
			}
			srv := startServer(t, d, "127.0.0.1:0", func(c *Config) { c.Authenticated = true }, append(az.ServerOptions(), grpc.Creds(ts.Credentials()))...)
			client := func(pair [2]string) slotdv1.AdminClient {
				tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: pair[0], KeyFile: pair[1], CAFile: caFile})
				if err != nil {
					t.Fatal(err)
				}
				return slotdv1.NewAdminClient(dial(t, srv.addr(), grpc.WithTransportCredentials(tc.Credentials())))
			}
			ctx := testCtx(t)
			leases := map[string]int64{} // the lease each registration got
			register := func(c slotdv1.AdminClient, id string) error {
				resp, err := c.RegisterNode(ctx, &slotdv1.RegisterNodeRequest{Node: &slotdv1.Node{Id: id, Address: "127.0.0.1:7999"}})
				leases[id] = resp.GetLeaseId()
				return err
			}
			heartbeat := func(c slotdv1.AdminClient, id string) error {
				_, err := c.Heartbeat(ctx, &slotdv1.HeartbeatRequest{NodeId: id, LeaseId: leases[id]})
				return err
			}
			a, store, adm := client(bound), client(unbound), client(admin)
			wantUnbound := codes.OK
			if require {
				wantUnbound = codes.PermissionDenied
			}
			tests := []struct {
				name string
				call func() error
				want codes.Code
			}{
				{"bound to na registers na", func() error { return register(a, "na") }, codes.OK},
				{"bound to na heartbeats na", func() error { return heartbeat(a, "na") }, codes.OK},
				{"bound to na registers nb", func() error { return register(a, "nb") }, codes.PermissionDenied},
				{"bound to na heartbeats nb", func() error { return heartbeat(a, "nb") }, codes.PermissionDenied},
				{"unbound store registers nc", func() error { return register(store, "nc") }, wantUnbound},
				{"admin registers nd", func() error { return register(adm, "nd") }, codes.OK},
			}
			for _, tc := range tests {
				before, err := d.Version(ctx)
				if err != nil {
					t.Fatal(err)
				}
				err = tc.call()
				if got := status.Code(err); got != tc.want {
					t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
				}
				if tc.want != codes.OK {
					if after, _ := d.Version(ctx); after != before {
						t.Errorf("%s was refused but the directory moved from version %d to %d", tc.name, before, after)
					}
				}
			}
			// Load reports: a caller bound to na reports only as na; a
			// refused report leaves nb unknown.
			loadClient := func(pair [2]string) slotdv1.LoadClient {
				tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: pair[0], KeyFile: pair[1], CAFile: caFile})
				if err != nil {
					t.Fatal(err)
				}
				return slotdv1.NewLoadClient(dial(t, srv.addr(), grpc.WithTransportCredentials(tc.Credentials())))
			}
			la, lstore, ladm := loadClient(bound), loadClient(unbound), loadClient(admin)
			if _, err := la.Report(ctx, &slotdv1.LoadReport{NodeId: "nb", Version: 1}); status.Code(err) != codes.PermissionDenied {
				t.Fatalf("bound to na reports nb: %v, want PermissionDenied", err)
			}
			if _, err := lstore.Report(ctx, &slotdv1.LoadReport{NodeId: "nd", Version: 1}); require != (status.Code(err) == codes.PermissionDenied) {
				t.Fatalf("unbound store reports nd (required %v): %v", require, err)
			}
			if _, err := la.Report(ctx, &slotdv1.LoadReport{NodeId: "na", Version: 1}); status.Code(err) == codes.PermissionDenied {
				t.Fatalf("bound to na reports na: %v", err)
			}
			lr, err := ladm.Get(ctx, &slotdv1.GetLoadRequest{NodeIds: []string{"nb"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range lr.GetNodes() {
				if n.GetKnown() {
					t.Errorf("%s known after refused reports", n.GetNodeId())
				}
			}
			nodes, _, err := d.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, n := range nodes {
				got[n.ID] = true
			}
			if !got["na"] || got["nb"] || got["nc"] == require || !got["nd"] {
				t.Errorf("registered nodes %v", got)
			}
		})
	}
}
