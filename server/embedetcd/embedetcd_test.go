package embedetcd

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/internal/devca"
	"github.com/slotd/slotd/tlsconf"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestValidate(t *testing.T) {
	srvTLS := tlsconf.Config{CertFile: "s.pem", KeyFile: "s-key.pem", CAFile: "ca.pem"}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no data dir", Config{}},
		{"bad URL", Config{DataDir: "x", ClientURL: "http://[::1"}},
		{"TLS on http", Config{DataDir: "x", ClientURL: "http://127.0.0.1:1", ClientTLS: srvTLS}},
		{"https without TLS", Config{DataDir: "x", PeerURL: "https://127.0.0.1:1"}},
		{"peer TLS on http", Config{DataDir: "x", PeerURL: "http://127.0.0.1:1", PeerTLS: srvTLS}},
		{"TLS with only a CA", Config{DataDir: "x", ClientURL: "https://127.0.0.1:1", ClientTLS: tlsconf.Config{CAFile: "ca.pem"}}},
		{"TLS with a cert and no key", Config{DataDir: "x", ClientURL: "https://127.0.0.1:1", ClientTLS: tlsconf.Config{CertFile: "s.pem"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err == nil {
				t.Fatalf("%+v accepted", tc.cfg)
			}
		})
	}
	if err := (Config{DataDir: "x", ClientURL: "https://127.0.0.1:1", ClientTLS: srvTLS}).Validate(); err != nil {
		t.Fatalf("TLS config refused: %v", err)
	}
}

// TestTLS serves client and peer TLS from devca's files: a client with a
// certificate from the CA reads and writes; plaintext, no certificate and
// a certificate from another CA are refused.
func TestTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	certs, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := devca.Generate(devca.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srvTLS := tlsconf.Config{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, CAFile: certs.CA}
	srv, err := Start(ctx, Config{
		DataDir:   t.TempDir(),
		ClientURL: fmt.Sprintf("https://127.0.0.1:%d", freePort(t)),
		PeerURL:   fmt.Sprintf("https://127.0.0.1:%d", freePort(t)),
		ClientTLS: srvTLS, PeerTLS: srvTLS,
		NoFsync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	eps := srv.Endpoints()
	host := eps[0][len("https://"):]

	dial := func(t *testing.T, tc *tlsconf.Config) (*clientv3.Client, error) {
		cc := clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second}
		if tc == nil {
			cc.Endpoints = []string{"http://" + host}
		} else {
			c, err := tlsconf.NewClient(*tc)
			if err != nil {
				t.Fatal(err)
			}
			c.ConfigureEtcd(&cc)
		}
		return clientv3.New(cc)
	}
	put := func(cli *clientv3.Client) error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cli.Put(rctx, "k", "v")
		return err
	}

	good := tlsconf.Config{CertFile: certs.AdminCert, KeyFile: certs.AdminKey, CAFile: certs.CA}
	cli, err := dial(t, &good)
	if err != nil {
		t.Fatal(err)
	}
	if err := put(cli); err != nil {
		t.Fatalf("client with a certificate from the CA: %v", err)
	}
	cli.Close()

	for _, tc := range []struct {
		name string
		tls  *tlsconf.Config
	}{
		{"plaintext", nil},
		{"no client certificate", &tlsconf.Config{CAFile: certs.CA}},
		{"certificate of another CA", &tlsconf.Config{CertFile: other.AdminCert, KeyFile: other.AdminKey, CAFile: certs.CA}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, err := dial(t, tc.tls)
			if err != nil {
				return // refused while connecting: fine
			}
			defer cli.Close()
			if err := put(cli); err == nil {
				t.Fatal("write accepted")
			}
		})
	}
}

// TestRestartKeepsData starts a member, writes, stops it and starts it
// again on the same data dir.
func TestRestartKeepsData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{
		DataDir:   t.TempDir(),
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		NoFsync:   true,
	}
	for i, want := range []string{"", "v"} {
		srv, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(resp.Kvs) == 1 {
			got = string(resp.Kvs[0].Value)
		}
		if got != want {
			t.Fatalf("start %d: k = %q, want %q", i, got, want)
		}
		if _, err := cli.Put(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
		cli.Close()
		srv.Close()
	}
}
