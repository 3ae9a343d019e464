package auth_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/tlsconf"
)

// headerCreds sends a fixed authorization header, for malformed ones.
type headerCreds string

func (h headerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": string(h)}, nil
}
func (headerCreds) RequireTransportSecurity() bool { return true }

// cluster is a TLS server (client certificates verified when given, tokens
// accepted) with a development set of certificates and tokens.
type cluster struct {
	set devca.Set
	srv *testServer
	reg *prometheus.Registry
}

func newCluster(t *testing.T, policy *auth.Policy, extra ...grpc.ServerOption) *cluster {
	t.Helper()
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tcfg := tlsconf.Config{CertFile: set.ServerCert, KeyFile: set.ServerKey, CAFile: set.CA}
	ts, err := tlsconf.NewServer(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	az, err := auth.New(auth.Config{Policy: policy, ClientCerts: tcfg.VerifiesClientCerts(), TokenFile: set.TokenFile,
		ReloadInterval: time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	opts := append(az.ServerOptions(), extra...)
	return &cluster{set: set, srv: startServer(t, ts.Credentials(), opts...), reg: reg}
}

// client dials with a client certificate (cert "" for none) and optional
// per-RPC credentials.
func (c *cluster) client(t *testing.T, cert, key string, rpc ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	tc, err := tlsconf.NewClient(tlsconf.Config{CAFile: c.set.CA, CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	return dial(t, c.srv.addr, append([]grpc.DialOption{grpc.WithTransportCredentials(tc.Credentials())}, rpc...)...)
}

func tokenOpt(t *testing.T, path string) grpc.DialOption {
	t.Helper()
	tok, err := auth.NewTokenCredentials(path, false)
	if err != nil {
		t.Fatal(err)
	}
	return grpc.WithPerRPCCredentials(tok)
}

func TestRolesOverTLS(t *testing.T) {
	c := newCluster(t, testPolicy())
	s := c.set
	wrongTok := filepath.Join(t.TempDir(), "wrong.token")
	if err := os.WriteFile(wrongTok, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		cert, key  string
		rpc        []grpc.DialOption
		check      codes.Code // admin method
		watch      codes.Code // read method (stream)
		caller     string     // auth.Operator seen by the admin handler
		checkError string     // substring of the Check error
	}{
		{name: "admin cert", cert: s.AdminCert, key: s.AdminKey, check: codes.OK, watch: codes.OK, caller: "admin"},
		{name: "read cert refused on admin method", cert: s.ReadCert, key: s.ReadKey,
			check: codes.PermissionDenied, watch: codes.OK,
			checkError: `auth: /grpc.health.v1.Health/Check needs role admin; caller "read" has read`},
		{name: "store cert refused on admin method", cert: s.StoreCert, key: s.StoreKey,
			check: codes.PermissionDenied, watch: codes.OK, checkError: "needs role admin"},
		{name: "server cert carries no role", cert: s.ServerCert, key: s.ServerKey,
			check: codes.PermissionDenied, watch: codes.PermissionDenied, checkError: `caller "slotd-server" has no role`},
		{name: "no identity", check: codes.Unauthenticated, watch: codes.Unauthenticated,
			checkError: "present a client certificate or an \"authorization: Bearer <token>\" header"},
		{name: "admin token", rpc: []grpc.DialOption{tokenOpt(t, s.AdminToken)}, check: codes.OK, watch: codes.OK, caller: "admin-token"},
		{name: "read token refused on admin method", rpc: []grpc.DialOption{tokenOpt(t, s.ReadToken)},
			check: codes.PermissionDenied, watch: codes.OK, checkError: `caller "read-token" has read`},
		{name: "wrong token", rpc: []grpc.DialOption{tokenOpt(t, wrongTok)},
			check: codes.Unauthenticated, watch: codes.Unauthenticated, checkError: "unknown bearer token"},
		{name: "wrong token with a good cert", cert: s.AdminCert, key: s.AdminKey, rpc: []grpc.DialOption{tokenOpt(t, wrongTok)},
			check: codes.Unauthenticated, watch: codes.Unauthenticated, checkError: "unknown bearer token"},
		{name: "read cert plus admin token", cert: s.ReadCert, key: s.ReadKey, rpc: []grpc.DialOption{tokenOpt(t, s.AdminToken)},
			check: codes.OK, watch: codes.OK, caller: "read+admin-token"},
		{name: "basic auth header", rpc: []grpc.DialOption{grpc.WithPerRPCCredentials(headerCreds("Basic YWRtaW46YWRtaW4="))},
			check: codes.Unauthenticated, watch: codes.Unauthenticated, checkError: `not "Bearer <token>"`},
		{name: "empty bearer", rpc: []grpc.DialOption{grpc.WithPerRPCCredentials(headerCreds("Bearer "))},
			check: codes.Unauthenticated, watch: codes.Unauthenticated},
	}
	want := map[string]int{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cli := c.client(t, tc.cert, tc.key, tc.rpc...)
			before := c.srv.health.checks.Load()
			err := callCheck(cli)
			if got := status.Code(err); got != tc.check {
				t.Fatalf("Check: %v, want %v", err, tc.check)
			}
			if tc.checkError != "" && !strings.Contains(status.Convert(err).Message(), tc.checkError) {
				t.Fatalf("Check error %q does not contain %q", status.Convert(err).Message(), tc.checkError)
			}
			ran := c.srv.health.checks.Load() - before
			if tc.check == codes.OK {
				if ran != 1 || c.srv.health.lastCaller() != tc.caller {
					t.Fatalf("handler ran %d times for caller %q, want once for %q", ran, c.srv.health.lastCaller(), tc.caller)
				}
			} else if ran != 0 {
				t.Fatalf("refused call reached the handler %d times", ran)
			}

			beforeW := c.srv.health.watches.Load()
			err = callWatch(cli)
			if got := status.Code(err); got != tc.watch {
				t.Fatalf("Watch: %v, want %v", err, tc.watch)
			}
			if tc.watch != codes.OK && c.srv.health.watches.Load() != beforeW {
				t.Fatal("refused stream reached the handler")
			}
		})
		for _, code := range []codes.Code{tc.check, tc.watch} {
			want[map[codes.Code]string{codes.OK: "allowed", codes.PermissionDenied: "denied", codes.Unauthenticated: "unauthenticated"}[code]]++
		}
	}
	expected := "# HELP slotd_auth_requests_total RPCs checked by authorization, by result (allowed, denied, unauthenticated).\n" +
		"# TYPE slotd_auth_requests_total counter\n"
	for _, r := range []string{"allowed", "denied", "unauthenticated"} {
		expected += fmt.Sprintf("slotd_auth_requests_total{result=%q} %d\n", r, want[r])
	}
	if err := testutil.GatherAndCompare(c.reg, strings.NewReader(expected), "slotd_auth_requests_total"); err != nil {
		t.Fatal(err)
	}
}

func TestTokenFileReload(t *testing.T) {
	c := newCluster(t, testPolicy())
	oldTok := tokenOpt(t, c.set.AdminToken)
	if err := callCheck(c.client(t, "", "", oldTok)); err != nil {
		t.Fatal(err)
	}

	// A bad edit (unknown role) is refused; the old tokens keep working.
	good, err := os.ReadFile(c.set.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := devca.WriteFileAtomic(c.set.TokenFile, append(good, []byte("0123456789abcdef0123 root\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := callCheck(c.client(t, "", "", oldTok)); err != nil {
		t.Fatalf("after a bad edit: %v", err)
	}

	// Rotation: a new admin token replaces the old one.
	newTok, err := devca.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := devca.WriteFileAtomic(c.set.TokenFile, []byte(newTok+" admin rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	newFile := filepath.Join(t.TempDir(), "new.token")
	if err := os.WriteFile(newFile, []byte(newTok), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rotated token accepted", func() error { return callCheck(c.client(t, "", "", tokenOpt(t, newFile))) })
	if err := callCheck(c.client(t, "", "", oldTok)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("old token after rotation: %v, want Unauthenticated", err)
	}
}

func TestNoRuleIsDeniedAndPublicIsOpen(t *testing.T) {
	c := newCluster(t, auth.NewPolicy().Public(readMethod)) // no rule for Check
	admin := c.client(t, c.set.AdminCert, c.set.AdminKey)
	err := callCheck(admin)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "no rule allows this method") {
		t.Fatalf("method without a rule: %v, want PermissionDenied naming the missing rule", err)
	}
	if err := callWatch(c.client(t, "", "")); err != nil {
		t.Fatalf("public method without identity: %v", err)
	}
}

func TestUncovered(t *testing.T) {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	if got := auth.NewPolicy().Require(adminMethod, auth.RoleAdmin).Uncovered(srv.GetServiceInfo()); strings.Join(got, " ") != "/grpc.health.v1.Health/List "+readMethod {
		t.Fatalf("Uncovered = %v, want List and Watch", got)
	}
	if got := testPolicy().Uncovered(srv.GetServiceInfo()); len(got) != 0 {
		t.Fatalf("Uncovered = %v, want none", got)
	}
}

func TestDisabledAllowsEverything(t *testing.T) {
	az, err := auth.New(auth.Config{Policy: testPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	if az.Enabled() {
		t.Fatal("no certificates and no token file, yet enabled")
	}
	srv := startServer(t, nil, az.ServerOptions()...)
	cli := dial(t, srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err := callCheck(cli); err != nil {
		t.Fatal(err)
	}
	if err := callWatch(cli); err != nil {
		t.Fatal(err)
	}
	if got := srv.health.lastCaller(); got != "anonymous" {
		t.Fatalf("operator %q, want anonymous", got)
	}
}

func TestTokenNeverSentInPlaintext(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	az, err := auth.New(auth.Config{Policy: testPolicy(), TokenFile: set.TokenFile})
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, nil, az.ServerOptions()...)
	plain := grpc.WithTransportCredentials(insecure.NewCredentials())

	if conn, err := grpc.NewClient(srv.addr, plain, tokenOpt(t, set.AdminToken)); err == nil {
		conn.Close()
		t.Fatal("a client sending a token over plaintext was built; want it refused")
	}

	// Explicitly allowed (a loopback-only demo) it works.
	tok, err := auth.NewTokenCredentials(set.AdminToken, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := callCheck(dial(t, srv.addr, plain, grpc.WithPerRPCCredentials(tok))); err != nil {
		t.Fatal(err)
	}
}

func TestLimitsRefuseLargeRequests(t *testing.T) {
	c := newCluster(t, testPolicy(), auth.Limits{MaxRecvMsgSize: 1024}.ServerOptions()...)
	cli := c.client(t, c.set.AdminCert, c.set.AdminKey)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Under the limit the handler runs (and answers NotFound for a service
	// it does not know).
	if _, err := cli.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 512)}); status.Code(err) != codes.NotFound {
		t.Fatalf("request under the limit: %v, want the handler's NotFound", err)
	}
	_, err := cli.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 4096)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("request over the limit: %v, want ResourceExhausted", err)
	}
	if n := c.srv.health.checks.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (only the small request)", n)
	}
}
