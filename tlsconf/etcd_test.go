package tlsconf_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/slotd/slotd/tlsconf"
)

// startTLSEtcd runs an embedded etcd member whose client port requires TLS
// with client certificates, configured through EtcdServerTLSInfo.
func startTLSEtcd(t *testing.T, srv tlsconf.Config) string {
	t.Helper()
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		cu, pu := freeURL(t, "https"), freeURL(t, "http")
		cfg := embed.NewConfig()
		cfg.Name = "tlsconf-test"
		cfg.Dir = dir
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.ClientTLSInfo = srv.EtcdServerTLSInfo()
		cfg.LogLevel = "error"
		cfg.LogOutputs = []string{"stderr"}
		cfg.UnsafeNoFsync = true
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			if attempt < 3 && strings.Contains(err.Error(), "address already in use") {
				continue
			}
			t.Fatalf("start etcd: %v", err)
		}
		t.Cleanup(e.Close)
		select {
		case <-e.Server.ReadyNotify():
			return cu.String()
		case err := <-e.Err():
			t.Fatalf("etcd failed before ready: %v", err)
		case <-time.After(60 * time.Second):
			t.Fatal("etcd not ready after 60s")
		}
	}
}

func freeURL(t *testing.T, scheme string) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: scheme, Host: l.Addr().String()}
}

func TestEtcdClientTLS(t *testing.T) {
	p := newPKI(t, "ca")
	srvCert, srvKey, _ := p.issue("server", serverLeaf())
	cliCert, cliKey, _ := p.issue("client", clientLeaf("slotd"))
	ca := p.path("ca.pem")
	ep := startTLSEtcd(t, tlsconf.Config{CertFile: srvCert, KeyFile: srvKey, CAFile: ca, ClientAuth: tlsconf.ClientAuthRequire})

	put := func(cfg tlsconf.Config) error {
		c, err := tlsconf.NewClient(cfg)
		if err != nil {
			return err
		}
		cc := clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second}
		c.ConfigureEtcd(&cc)
		cli, err := clientv3.New(cc)
		if err != nil {
			return err
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := cli.Put(ctx, "k", "v"); err != nil {
			return fmt.Errorf("put: %w", err)
		}
		resp, err := cli.Get(ctx, "k")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
			return fmt.Errorf("get: %v %v", resp, err)
		}
		return nil
	}
	if err := put(tlsconf.Config{CertFile: cliCert, KeyFile: cliKey, CAFile: ca}); err != nil {
		t.Fatalf("client with certificate: %v", err)
	}
	if err := put(tlsconf.Config{CAFile: ca}); err == nil {
		t.Fatal("client without certificate reached an etcd that requires one")
	}
}

// TestEtcdServerCARotation: etcd's server certificate moves to a new CA and
// the client's CA file follows; a clientv3.Config prepared before the
// rotation connects afterwards, because ConfigureEtcd's credentials read the
// files per handshake rather than the snapshot in Config.TLS.
func TestEtcdServerCARotation(t *testing.T) {
	clientCA := newPKI(t, "client CA")
	oldCA := newPKI(t, "old server CA")
	newCA := newPKI(t, "new server CA")
	srvCert, srvKey, _ := oldCA.issue("server", serverLeaf())
	cliCert, cliKey, _ := clientCA.issue("client", clientLeaf("slotd"))
	ep := startTLSEtcd(t, tlsconf.Config{CertFile: srvCert, KeyFile: srvKey, CAFile: clientCA.path("ca.pem"),
		ClientAuth: tlsconf.ClientAuthRequire})

	serverCA := oldCA.path("ca.pem")
	c, err := tlsconf.NewClient(tlsconf.Config{CertFile: cliCert, KeyFile: cliKey, CAFile: serverCA,
		ReloadInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cc := clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second}
	c.ConfigureEtcd(&cc)
	put := func() error {
		cli, err := clientv3.New(cc)
		if err != nil {
			return err
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = cli.Put(ctx, "k", "v")
		return err
	}
	if err := put(); err != nil {
		t.Fatal(err)
	}
	newCA.issueInto(srvCert, srvKey, serverLeaf())
	newCA.writeCA(serverCA)
	eventually(t, "etcd client trusts the rotated server CA", put)
}
