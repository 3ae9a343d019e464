package etcdtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/slotd/slotd/internal/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPutGetRestart(t *testing.T) {
	c := etcdtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := c.Client()
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("put: %v", err)
	}
	c.Restart(t)
	// The old client reconnects by itself to the same port.
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("after restart k = %v, want v1", resp.Kvs)
	}
	other := c.NewClient(t)
	if other == cli {
		t.Fatal("NewClient returned the shared client")
	}
	if _, err := other.Put(ctx, "k", "v2"); err != nil {
		t.Fatalf("put from second client: %v", err)
	}
}

func TestCompact(t *testing.T) {
	c := etcdtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := c.Client()
	first, err := cli.Put(ctx, "k", "1")
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := cli.Put(ctx, "k", "2"); err != nil {
		t.Fatalf("put: %v", err)
	}
	rev := c.Compact(t)
	if rev <= first.Header.Revision {
		t.Fatalf("compacted to %d, want > %d", rev, first.Header.Revision)
	}
	_, err = cli.Get(ctx, "k", clientv3.WithRev(first.Header.Revision))
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("get at compacted revision: err = %v, want ErrCompacted", err)
	}
}

func TestTwoClustersAreIndependent(t *testing.T) {
	a, b := etcdtest.New(t), etcdtest.New(t)
	if a.Endpoints()[0] == b.Endpoints()[0] {
		t.Fatalf("both members on %s", a.Endpoints()[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Client().Put(ctx, "only-a", "x"); err != nil {
		t.Fatalf("put: %v", err)
	}
	resp, err := b.Client().Get(ctx, "only-a")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatal("key written to one member is visible in the other")
	}
}
