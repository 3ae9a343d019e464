package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/directory"
	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/internal/syncbuf"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/server/servertest"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/tlsconf"
)

// conn dials addr with opts, closed when the test ends.
func conn(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tlsDial is a dial option for TLS verifying the server against ca, with a
// client certificate when cert is not empty.
func tlsDial(t *testing.T, ca, cert, key string) grpc.DialOption {
	t.Helper()
	tc, err := tlsconf.NewClient(tlsconf.Config{CertFile: cert, KeyFile: key, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	return grpc.WithTransportCredentials(tc.Credentials())
}

// TestTLSListener serves slotkv standalone with mutual TLS required and
// checks who gets in: plaintext and other CAs are refused during the
// handshake, a read certificate may use KV but not the Store protocol, a
// store certificate may use the Store protocol; /metrics is HTTPS only.
func TestTLSListener(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	addr, httpAddr, _ := startSlotkv(t, "--id", "kv-tls", "--standalone", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--fsync=false",
		"--tls-cert", set.ServerCert, "--tls-key", set.ServerKey, "--tls-ca", set.CA, "--client-auth", "require")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put := func(c *grpc.ClientConn) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := kvpb.NewKVClient(c).Put(cctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
		return err
	}
	checksum := func(c *grpc.ClientConn) error {
		_, err := slotdv1.NewStoreClient(c).Checksum(ctx, &slotdv1.ChecksumRequest{Slot: 1})
		return err
	}

	for _, tc := range []struct {
		name string
		dial grpc.DialOption
	}{
		{"plaintext client", grpc.WithTransportCredentials(insecure.NewCredentials())},
		{"client certificate of another CA", tlsDial(t, set.CA, other.StoreCert, other.StoreKey)},
		{"client trusting another CA", tlsDial(t, other.CA, set.StoreCert, set.StoreKey)},
		{"no client certificate", tlsDial(t, set.CA, "", "")},
	} {
		t.Run(tc.name+" refused", func(t *testing.T) {
			err := put(conn(t, addr, tc.dial))
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("put: %v, want Unavailable (no TLS session)", err)
			}
		})
	}

	read := conn(t, addr, tlsDial(t, set.CA, set.ReadCert, set.ReadKey))
	if err := put(read); err != nil {
		t.Fatalf("read certificate put: %v", err)
	}
	if err := checksum(read); status.Code(err) != codes.PermissionDenied {
		t.Errorf("read certificate Checksum: %v, want PermissionDenied", err)
	}
	// Fence with a read certificate must not stop writes.
	if _, err := slotdv1.NewStoreClient(read).Fence(ctx, &slotdv1.FenceRequest{Slot: 1, MoveId: "m"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("read certificate Fence: %v, want PermissionDenied", err)
	}
	store := conn(t, addr, tlsDial(t, set.CA, set.StoreCert, set.StoreKey))
	if err := checksum(store); err != nil {
		t.Errorf("store certificate Checksum: %v", err)
	}

	pool := x509.NewCertPool()
	pem, err := os.ReadFile(set.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	// With --client-auth require the scraper needs a certificate too.
	scraper, err := tls.LoadX509KeyPair(set.ReadCert, set.ReadKey)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{scraper}}}}
	resp, err := hc.Get("https://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("/metrics over HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics over HTTPS: %s", resp.Status)
	}
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := plain.Get("http://" + httpAddr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("/metrics answered plaintext HTTP")
		}
	}
}

// TestTokens serves slotkv with TLS, optional client certificates and a
// token file: a read token uses KV, a caller without identity gets
// Unauthenticated, a read token is refused on the Store protocol.
func TestTokens(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	addr, _, _ := startSlotkv(t, "--id", "kv-tok", "--standalone", "--listen", "127.0.0.1:0", "--http", "",
		"--data-dir", t.TempDir(), "--fsync=false",
		"--tls-cert", set.ServerCert, "--tls-key", set.ServerKey, "--tls-ca", set.CA, "--token-file", set.TokenFile)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	withToken := func(file string) *grpc.ClientConn {
		tok, err := auth.NewTokenCredentials(file, false)
		if err != nil {
			t.Fatal(err)
		}
		return conn(t, addr, tlsDial(t, set.CA, "", ""), grpc.WithPerRPCCredentials(tok))
	}
	read := withToken(set.ReadToken)
	if _, err := kvpb.NewKVClient(read).Put(ctx, &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatalf("read token put: %v", err)
	}
	if _, err := slotdv1.NewStoreClient(read).DropSlot(ctx, &slotdv1.DropSlotRequest{Slot: 1, MoveId: "m"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("read token DropSlot: %v, want PermissionDenied", err)
	}
	if _, err := slotdv1.NewStoreClient(withToken(set.StoreToken)).Checksum(ctx, &slotdv1.ChecksumRequest{Slot: 1}); err != nil {
		t.Errorf("store token Checksum: %v", err)
	}
	anon := conn(t, addr, tlsDial(t, set.CA, "", ""))
	if _, err := kvpb.NewKVClient(anon).Get(ctx, &kvpb.GetRequest{Key: []byte("k")}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no identity Get: %v, want Unauthenticated", err)
	}
}

// tlsSlotd serves slotd (server/servertest, no mover) over mutual TLS on
// a real etcd, and returns a directory over that etcd and its address.
func tlsSlotd(t *testing.T, set devca.Set) (*directory.Directory, string) {
	t.Helper()
	s := servertest.Start(t, func(c *server.Config) {
		c.TLSCert, c.TLSKey, c.TLSCA, c.ClientAuth = set.ServerCert, set.ServerKey, set.CA, string(tlsconf.ClientAuthRequire)
		c.DisableMover = true
	})
	return s.Directory(t), s.Addr()
}

// TestRegistersOverTLS runs slotkv against a slotd that requires mutual TLS:
// with its store certificate it registers and follows the map; slotkv
// without TLS to slotd never gets its registration through.
func TestRegistersOverTLS(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d, slotd := tlsSlotd(t, set)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	registered := func(id string) (bool, error) {
		nodes, _, err := d.Nodes(ctx)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if n.ID == id {
				return true, nil
			}
		}
		return false, nil
	}
	// The plaintext node starts first: by the time the TLS node registered
	// it has had every chance to.
	_, _, stopPlain := startSlotkv(t, "--id", "kv-plain", "--listen", "127.0.0.1:0", "--http", "", "--data-dir", t.TempDir(),
		"--fsync=false", "--slotd", slotd)
	_, _, stop := startSlotkv(t, "--id", "kv-1", "--listen", "127.0.0.1:0", "--http", "", "--data-dir", t.TempDir(), "--fsync=false",
		"--slotd", slotd, "--tls-cert", set.ServerCert, "--tls-key", set.ServerKey, "--tls-ca", set.CA, "--client-auth", "require",
		"--slotd-tls-cert", set.StoreCert, "--slotd-tls-key", set.StoreKey)
	waitfor.True(t, 30*time.Second, "kv-1 registered with slotd over TLS", func() bool {
		ok, err := registered("kv-1")
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	if ok, err := registered("kv-plain"); err != nil || ok {
		t.Errorf("a slotkv dialing slotd in plaintext registered (%v)", err)
	}
	if c := stop(); c != exitOK {
		t.Errorf("kv-1 exit %d", c)
	}
	if c := stopPlain(); c != exitOK {
		t.Errorf("kv-plain exit %d", c)
	}
}

func TestTLSUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert", "c.pem"}, "--tls-key"},
		{"token without TLS", []string{"--token-file", "t"}, "--token-file need"},
		{"client auth without TLS", []string{"--client-auth", "require"}, "--client-auth"},
		{"slotd cert without key", []string{"--slotd-tls-cert", "c.pem"}, "--slotd-tls-key"},
		{"slotd token in plaintext", []string{"--slotd-token-file", "t"}, "--slotd-token-file needs TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncbuf.Buffer
			args := append([]string{"--id", "a", "--data-dir", t.TempDir()}, tc.args...)
			if c := run(context.Background(), args, &out); c != exitUsage {
				t.Fatalf("exit %d, want %d: %s", c, exitUsage, out.String())
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("message %q does not mention %q", out.String(), tc.want)
			}
		})
	}
}

// TestRegistersThroughAnyReplica: with the first --slotd down, a node
// registers (and heartbeats) through the next one, over TLS with each
// address's own server name.
func TestRegistersThroughAnyReplica(t *testing.T) {
	set, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d, slotd := tlsSlotd(t, set)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, stop := startSlotkv(t, "--id", "kv-r", "--listen", "127.0.0.1:0", "--http", "", "--data-dir", t.TempDir(), "--fsync=false",
		"--slotd", dead+","+slotd, "--tls-cert", set.ServerCert, "--tls-key", set.ServerKey, "--tls-ca", set.CA,
		"--slotd-tls-cert", set.StoreCert, "--slotd-tls-key", set.StoreKey)
	waitfor.Err(t, 30*time.Second, "kv-r registers through the live replica", func() error {
		nodes, _, err := d.Nodes(ctx)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.ID == "kv-r" {
				return nil
			}
		}
		return errors.New("not registered")
	})
	if c := stop(); c != exitOK {
		t.Errorf("kv-r exit %d", c)
	}
}
