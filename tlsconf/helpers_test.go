package tlsconf_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/internal/waitfor"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// eventually polls cond until it returns nil, failing the test with the last
// error after a generous bound. The bound is a safety net, not an assertion.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	waitfor.Err(t, 20*time.Second, what, cond)
}

// pki issues certificates from one CA into a temporary directory.
type pki struct {
	t   *testing.T
	ca  *devca.CA
	dir string
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	ca, err := devca.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &pki{t: t, ca: ca, dir: dir}
	p.writeCA("ca.pem")
	return p
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// writeCA writes this CA's certificate to name (in p.dir unless absolute).
func (p *pki) writeCA(name string) string {
	p.t.Helper()
	path := name
	if !filepath.IsAbs(path) {
		path = p.path(name)
	}
	if err := devca.WriteFileAtomic(path, p.ca.CertPEM, 0o644); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// issue writes a certificate and key as <name>.pem and <name>-key.pem.
func (p *pki) issue(name string, l devca.Leaf) (cert, key string, leaf *x509.Certificate) {
	p.t.Helper()
	kp, err := p.ca.Issue(l)
	if err != nil {
		p.t.Fatal(err)
	}
	cert, key = p.path(name+".pem"), p.path(name+"-key.pem")
	if err := kp.WriteFiles(cert, key); err != nil {
		p.t.Fatal(err)
	}
	return cert, key, kp.Cert
}

// issueInto issues a certificate and renames it over existing paths, the way
// an operator (or cert-manager) rotates files.
func (p *pki) issueInto(cert, key string, l devca.Leaf) *x509.Certificate {
	p.t.Helper()
	kp, err := p.ca.Issue(l)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := kp.WriteFiles(cert, key); err != nil {
		p.t.Fatal(err)
	}
	return kp.Cert
}

func serverLeaf() devca.Leaf {
	return devca.Leaf{CommonName: "server", DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}
}

func clientLeaf(cn string) devca.Leaf { return devca.Leaf{CommonName: cn, Client: true} }

// testServer is a real gRPC server on 127.0.0.1 serving the health service.
type testServer struct {
	addr string

	mu         sync.Mutex // guards lastClient
	lastClient *big.Int   // serial of the last verified client certificate seen
}

func startServer(t *testing.T, creds credentials.TransportCredentials) *testServer {
	t.Helper()
	ts := &testServer{}
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if p, ok := peer.FromContext(ctx); ok {
			if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
				ts.mu.Lock()
				ts.lastClient = info.State.VerifiedChains[0][0].SerialNumber
				ts.mu.Unlock()
			}
		}
		return h(ctx, req)
	}
	var opts []grpc.ServerOption
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	opts = append(opts, grpc.UnaryInterceptor(record))
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return ts
}

func (ts *testServer) clientSerial() *big.Int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.lastClient
}

// check makes a new connection to addr, calls Health/Check and returns the
// serial of the certificate the server presented (nil over plaintext).
func check(addr string, creds credentials.TransportCredentials) (*big.Int, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return nil, err
	}
	if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
		return info.State.PeerCertificates[0].SerialNumber, nil
	}
	return nil, nil
}

func sameSerial(got, want *big.Int) error {
	if got == nil || got.Cmp(want) != 0 {
		return fmt.Errorf("serial %v, want %v", got, want)
	}
	return nil
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
