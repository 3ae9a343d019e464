package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/syncbuf"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/tlsconf"
)

// The ignored goroutines are plain HTTP/1 connections that etcd's peer
// transport (rafthttp) keeps idle between the members of TestEtcdMembers
// after they stop; embed.Etcd.Close does not close them. The tests without
// a multi-member cluster pass without these exceptions.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
	)
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, 30*time.Second, what, cond)
}

// proc is slotd (or slotd etcd) running in this process.
type proc struct {
	cancel context.CancelFunc
	code   chan int
	log    *syncbuf.Buffer
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{cancel: cancel, code: make(chan int, 1), log: &syncbuf.Buffer{}}
	go func() { p.code <- runContext(ctx, args, io.Discard, p.log) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop cancels slotd (as SIGTERM does) and returns its exit code.
func (p *proc) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	select {
	case c, ok := <-p.code:
		if ok {
			close(p.code)
			return c
		}
		return exitOK
	case <-time.After(60 * time.Second):
		t.Fatalf("slotd did not stop; log:\n%s", p.log)
		return -1
	}
}

// serveArgs are the flags of a slotd on free ports with its own data dir.
func serveArgs(t *testing.T, grpcAddr, httpAddr string, extra ...string) []string {
	return append([]string{
		"--data-dir", t.TempDir(), "--listen", grpcAddr, "--http", httpAddr,
		"--etcd-client-url", freeAddr(t), "--etcd-peer-url", freeAddr(t), "--name", "t1", "--log-level", "debug",
	}, extra...)
}

func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func httpGet(c *http.Client, url string) (int, string) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown flag", nil, []string{"--nope"}, "unknown flag"},
		{"unknown command", nil, []string{"serve-me"}, "unknown command"},
		{"bad log level", nil, []string{"--log-level", "loud", "--listen", "127.0.0.1:0", "--http", ""}, "--log-level"},
		{"bad env value", map[string]string{"SLOTD_SHUTDOWN_TIMEOUT": "soon"}, nil, "SLOTD_SHUTDOWN_TIMEOUT"},
		{"token without tls", nil, []string{"--token-file", "x"}, "--token-file needs --tls-cert"},
		{"bad etcd prefix", nil, []string{"--etcd-prefix", "/a b/"}, "--etcd-prefix"},
		{"embedded etcd TLS with only a CA", nil, []string{"--etcd-tls-ca", "x"}, "--etcd-tls-cert"},
		{"etcd member without name", nil, []string{"etcd", "--data-dir", "x"}, "--name and --data-dir"},
		{"etcd member with a CA alone", nil, []string{"etcd", "--name", "e1", "--data-dir", "x", "--tls-ca", "ca.pem"}, "--tls-cert and --tls-key go together"},
		{"etcd member with a certificate, no key", nil, []string{"etcd", "--name", "e1", "--data-dir", "x", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stderr syncbuf.Buffer
			if code := runContext(context.Background(), tc.args, io.Discard, &stderr); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	e := etcdtest.New(t)
	d, err := directory.New(directory.Config{Client: e.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetSchema(context.Background(), 0, directory.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	var stderr syncbuf.Buffer
	code := runContext(context.Background(), []string{"--etcd-endpoints", strings.Join(e.Endpoints(), ","), "--listen", "127.0.0.1:0", "--http", ""}, io.Discard, &stderr)
	if code != exitSchema || !strings.Contains(stderr.String(), "upgrade this binary") {
		t.Errorf("exit %d, stderr %q; want %d and a message saying to upgrade", code, stderr.String(), exitSchema)
	}
}

// TestServe starts slotd with its embedded etcd, bootstraps it, follows the
// map with the SDK and stops it as SIGTERM would.
func TestServe(t *testing.T) {
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	t.Setenv("SLOTD_LISTEN", grpcAddr) // the environment sets flags too
	args := serveArgs(t, grpcAddr, httpAddr)
	p := start(t, slicesWithout(args, "--listen", grpcAddr)...)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	eventually(t, "/readyz answers 200", func() bool { c, _ := httpGet(hc, "http://"+httpAddr+"/readyz"); return c == 200 })
	if c, body := httpGet(hc, "http://"+httpAddr+"/metrics"); c != 200 || !strings.Contains(body, "slotd_service_watchers") || !strings.Contains(body, "slotd_grpc_server_handled_total") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d, missing slotd_ or go_ metrics", c)
	}

	conn := dial(t, grpcAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hr, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hr, err)
	}
	ac := slotdv1.NewAdminClient(conn)
	boot, err := ac.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: []*slotdv1.Node{
		{Id: "a", Address: "127.0.0.1:7001"}, {Id: "b", Address: "127.0.0.1:7002"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Options{Endpoints: []string{grpcAddr}, MaxReconnectBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Map().Version() < boot.GetMap().GetVersion() {
		t.Errorf("SDK at version %d, bootstrap made %d", c.Map().Version(), boot.GetMap().GetVersion())
	}
	st, err := ac.Status(ctx, &slotdv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetServer() != "t1" || len(st.GetNodes()) != 2 {
		t.Errorf("status: server %q, %d nodes", st.GetServer(), len(st.GetNodes()))
	}
	eventually(t, "t1 leads the mover", func() bool {
		st, err := ac.Status(ctx, &slotdv1.StatusRequest{})
		return err == nil && st.GetMoverLeader() == "t1"
	})

	if code := p.stop(t); code != exitOK {
		t.Fatalf("exit %d after SIGTERM; log:\n%s", code, p.log)
	}
	log := p.log.String()
	if !strings.Contains(log, "slotd shutting down") || !strings.Contains(log, "slotd stopped") {
		t.Errorf("log lacks the shutdown: %s", log)
	}
	if _, err := net.DialTimeout("tcp", grpcAddr, time.Second); err == nil {
		t.Errorf("gRPC port still accepts after shutdown")
	}
}

func slicesWithout(args []string, flag, value string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag && i+1 < len(args) && args[i+1] == value {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// TestTLSFlags runs slotd with the development CA: plaintext clients are
// refused, a read certificate cannot change anything, an admin certificate
// can, and /readyz is served over HTTPS.
func TestTLSFlags(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	grpcAddr, httpAddr, etcdAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	// The embedded etcd serves TLS too and requires client certificates.
	start(t, serveArgs(t, grpcAddr, httpAddr, "--tls-cert", set.ServerCert, "--tls-key", set.ServerKey,
		"--tls-ca", set.CA, "--token-file", set.TokenFile, "--etcd-client-url", etcdAddr,
		"--etcd-tls-cert", set.ServerCert, "--etcd-tls-key", set.ServerKey, "--etcd-tls-ca", set.CA)...)

	pool := x509.NewCertPool()
	ca, err := os.ReadFile(set.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	eventually(t, "/readyz over HTTPS", func() bool { c, _ := httpGet(hc, "https://"+httpAddr+"/readyz"); return c == 200 })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	withCert := func(cert, key string) slotdv1.AdminClient {
		tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: cert, KeyFile: key, CAFile: set.CA})
		if err != nil {
			t.Fatal(err)
		}
		return slotdv1.NewAdminClient(dial(t, grpcAddr, grpc.WithTransportCredentials(tc.Credentials())))
	}
	plain := slotdv1.NewAdminClient(dial(t, grpcAddr))
	if _, err := plain.Status(ctx, &slotdv1.StatusRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext Status: %v, want Unavailable", err)
	}
	read := withCert(set.ReadCert, set.ReadKey)
	if _, err := read.Status(ctx, &slotdv1.StatusRequest{}); err != nil {
		t.Errorf("read Status: %v", err)
	}
	// A read-only client is refused on apply, drain and throttle, and
	// nothing changes (throttle stays unset until the admin sets it below).
	for name, call := range map[string]func() error{
		"Apply":     func() error { _, err := read.Apply(ctx, &slotdv1.ApplyRequest{PlanId: "p"}); return err },
		"DrainNode": func() error { _, err := read.DrainNode(ctx, &slotdv1.DrainNodeRequest{NodeId: "a"}); return err },
		"SetThrottle": func() error {
			_, err := read.SetThrottle(ctx, &slotdv1.SetThrottleRequest{BytesPerSecond: 5})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("read %s: %v, want PermissionDenied", name, err)
		}
	}
	if st, err := read.Status(ctx, &slotdv1.StatusRequest{}); err != nil || st.GetThrottle().GetDefaultBytesPerSecond() == 5 {
		t.Errorf("after refused calls: status %v %v, want the throttle unchanged", st.GetThrottle(), err)
	}
	admin := withCert(set.AdminCert, set.AdminKey)
	resp, err := admin.SetThrottle(ctx, &slotdv1.SetThrottleRequest{BytesPerSecond: 5})
	if err != nil || resp.GetThrottle().GetDefaultBytesPerSecond() != 5 {
		t.Errorf("admin SetThrottle: %v %v", resp, err)
	}

	// The embedded etcd: plaintext and certificate-less clients get nothing.
	for _, tc := range []struct {
		name string
		ep   string
		tls  *tlsconf.Config
	}{
		{"plaintext", "http://" + etcdAddr, nil},
		{"no client certificate", "https://" + etcdAddr, &tlsconf.Config{CAFile: set.CA}},
	} {
		cc := clientv3.Config{Endpoints: []string{tc.ep}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
		if tc.tls != nil {
			c, err := tlsconf.NewClient(*tc.tls)
			if err != nil {
				t.Fatal(err)
			}
			c.ConfigureEtcd(&cc)
		}
		cli, err := clientv3.New(cc)
		if err != nil {
			continue
		}
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		if _, err := cli.Get(rctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
			t.Errorf("etcd %s client read the directory", tc.name)
		}
		rcancel()
		cli.Close()
	}
}

// TestEtcdMembers runs a three-member etcd cluster with `slotd etcd` and a
// slotd on top of it, in plaintext and with TLS everywhere (client
// certificates required from clients and peers).
func TestEtcdMembers(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "TLS"}[withTLS], func(t *testing.T) {
			scheme, memberTLS, slotdTLS := "http", []string(nil), []string(nil)
			var clientTLS *tlsconf.Config
			if withTLS {
				scheme = "https"
				memberTLS = []string{"--tls-cert", set.ServerCert, "--tls-key", set.ServerKey, "--tls-ca", set.CA}
				slotdTLS = []string{"--etcd-tls-cert", set.ServerCert, "--etcd-tls-key", set.ServerKey, "--etcd-tls-ca", set.CA}
				clientTLS = &tlsconf.Config{CertFile: set.ServerCert, KeyFile: set.ServerKey, CAFile: set.CA}
			}
			type member struct{ name, client, peer string }
			ms := make([]member, 3)
			var initial []string
			for i := range ms {
				ms[i] = member{fmt.Sprintf("e%d", i+1), scheme + "://" + freeAddr(t), scheme + "://" + freeAddr(t)}
				initial = append(initial, ms[i].name+"="+ms[i].peer)
			}
			var eps []string
			for _, m := range ms {
				start(t, append([]string{"etcd", "--name", m.name, "--data-dir", t.TempDir(), "--client-url", m.client, "--peer-url", m.peer,
					"--initial-cluster", strings.Join(initial, ","), "--log-level", "warn"}, memberTLS...)...)
				eps = append(eps, m.client)
			}
			cc := clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
			if clientTLS != nil {
				c, err := tlsconf.NewClient(*clientTLS)
				if err != nil {
					t.Fatal(err)
				}
				c.ConfigureEtcd(&cc)
			}
			cli, err := clientv3.New(cc)
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			eventually(t, "three members", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				r, err := cli.MemberList(ctx)
				return err == nil && len(r.Members) == 3
			})
			if withTLS {
				// A client without a certificate reads nothing.
				c, err := tlsconf.NewClient(tlsconf.Config{CAFile: set.CA})
				if err != nil {
					t.Fatal(err)
				}
				bare := clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
				c.ConfigureEtcd(&bare)
				if anon, err := clientv3.New(bare); err == nil {
					rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
					if _, err := anon.Get(rctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
						t.Error("a client without a certificate read the members")
					}
					rcancel()
					anon.Close()
				}
			}

			grpcAddr := freeAddr(t)
			start(t, append([]string{"--etcd-endpoints", strings.Join(eps, ","), "--listen", grpcAddr, "--http", "", "--name", "s1"}, slotdTLS...)...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ac := slotdv1.NewAdminClient(dial(t, grpcAddr))
			eventually(t, "slotd over the three members", func() bool {
				_, err := ac.Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: []*slotdv1.Node{{Id: "a", Address: "127.0.0.1:7001"}}})
				return err == nil
			})
		})
	}
}
