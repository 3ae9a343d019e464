package server_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/server/servertest"
)

// TestEtcdPrefixTwoClusters runs two slotd clusters on one etcd under two
// prefixes: each bootstraps its own nodes, elects its own mover leader,
// keeps its own versions, and names itself with its own cluster id, so an
// SDK client of one never takes the other's map.
func TestEtcdPrefixTwoClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := etcdtest.New(t)
	a := servertest.StartOn(t, e, func(c *server.Config) { c.Name = "sa" })
	b := servertest.StartOn(t, e, func(c *server.Config) { c.Name = "sb"; c.EtcdPrefix = "/clusters/b/" })
	if a.ClusterID() == b.ClusterID() || a.ClusterID() == "" {
		t.Fatalf("cluster ids %q and %q", a.ClusterID(), b.ClusterID())
	}
	boot := func(s *servertest.Slotd, ids ...string) {
		t.Helper()
		var nodes []*slotdv1.Node
		for i, id := range ids {
			nodes = append(nodes, &slotdv1.Node{Id: id, Address: "127.0.0.1:" + string(rune('1'+i)), Weight: 1})
		}
		if _, err := slotdv1.NewAdminClient(s.Dial(t)).Bootstrap(ctx, &slotdv1.BootstrapRequest{Nodes: nodes, Operator: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	boot(a, "a1", "a2")
	boot(b, "b1", "b2", "b3")
	ca, cb := a.Client(t, client.Options{}), b.Client(t, client.Options{})
	if ca.Map().ClusterID() != a.ClusterID() || cb.Map().ClusterID() != b.ClusterID() {
		t.Fatalf("maps carry %q and %q", ca.Map().ClusterID(), cb.Map().ClusterID())
	}
	if len(ca.Map().Nodes()) != 2 || len(cb.Map().Nodes()) != 3 {
		t.Fatalf("nodes: a %v, b %v", ca.Map().Nodes(), cb.Map().Nodes())
	}
	for _, s := range []*servertest.Slotd{a, b} {
		st, err := slotdv1.NewAdminClient(s.Dial(t)).Status(ctx, &slotdv1.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetVersion() != 1 {
			t.Fatalf("%s at version %d, want 1 (its bootstrap alone)", st.GetServer(), st.GetVersion())
		}
		// Each cluster elects its own mover leader.
		waitfor.True(t, 30*time.Second, st.GetServer()+" leading its own cluster", func() bool {
			st, err := slotdv1.NewAdminClient(s.Dial(t)).Status(ctx, &slotdv1.StatusRequest{})
			return err == nil && st.GetMoverLeader() == st.GetServer()
		})
	}
	// Each directory sits under its own prefix only.
	if snap, err := b.Directory(t).Snapshot(ctx); err != nil || len(snap.Nodes) != 3 {
		t.Fatalf("b's directory: %v nodes, %v", snap, err)
	}
	resp, err := e.Client().Get(ctx, "/clusters/b/", clientv3.WithPrefix())
	if err != nil || resp.Count == 0 {
		t.Fatalf("nothing under /clusters/b/: %v", err)
	}
}
