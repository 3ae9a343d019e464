package embedetcd

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("empty data dir accepted")
	}
	if err := (Config{DataDir: "x", ClientURL: "http://[::1"}).Validate(); err == nil {
		t.Fatal("bad URL accepted")
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
