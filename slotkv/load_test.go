package slotkv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/node"
	"github.com/slotd/slotd/server"
	"github.com/slotd/slotd/server/servertest"
	"github.com/slotd/slotd/slotkv/kvpb"
	"github.com/slotd/slotd/slots"
)

// TestReporterSendsToEveryReplica: a real slotkv store following two
// in-process slotd replicas over one etcd reports its load to both over
// gRPC; each replica then shows the node's keys and bytes (its own
// aggregate, nothing in etcd), the other node stays unknown, and a report
// naming another node is refused by both with nothing changed.
func TestReporterSendsToEveryReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := etcdtest.New(t)
	noMover := func(name string) func(*server.Config) {
		return func(c *server.Config) { c.Name = name; c.DisableMover = true }
	}
	a, b := servertest.StartOn(t, e, noMover("sa")), servertest.StartOn(t, e, noMover("sb"))
	if _, err := slotdv1.NewAdminClient(a.Dial(t)).Bootstrap(ctx, &slotdv1.BootstrapRequest{Operator: "test", Nodes: []*slotdv1.Node{
		{Id: "n1", Address: "127.0.0.1:1", Weight: 1}, {Id: "n2", Address: "127.0.0.1:2", Weight: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	cm, err := node.NewClusterMap(client.Options{Endpoints: []string{a.Addr(), b.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(ctx)
	mdone := make(chan error)
	go func() { mdone <- cm.Run(mctx) }()
	defer func() { mcancel(); <-mdone }()
	waitfor.True(t, 30*time.Second, "the node's map", func() bool { return cm.Map() != nil })

	srv, err := Open(Config{ID: "n1", DataDir: t.TempDir(), Map: cm, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// 40 keys of n1's slots, 100-byte values; reads of each.
	keys, bytes := 0, uint64(0)
	perSlot := map[uint16]uint64{}
	for i := 0; keys < 40; i++ {
		k := fmt.Appendf(nil, "user:%d", i)
		if o, _ := cm.Owner(slots.ForKey(k)); o.ID != "n1" {
			continue
		}
		if _, err := srv.Put(ctx, &kvpb.PutRequest{Key: k, Value: make([]byte, 100)}); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Get(ctx, &kvpb.GetRequest{Key: k}); err != nil {
			t.Fatal(err)
		}
		keys++
		bytes += uint64(len(k) + 8 + 100) // key, version, value
		perSlot[slots.ForKey(k).Uint16()]++
	}

	replicas := []slotdv1.LoadClient{slotdv1.NewLoadClient(a.Dial(t)), slotdv1.NewLoadClient(b.Dial(t))}
	rep, err := node.NewReporter(node.ReporterConfig{Node: srv.Node(), Replicas: replicas, Interval: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A replica whose map lags the node's answers Unavailable; the next
	// report goes through.
	waitfor.True(t, 30*time.Second, "a report every replica takes", func() bool { return rep.ReportOnce(ctx) == nil })
	for i, c := range replicas {
		got, err := c.Get(ctx, &slotdv1.GetLoadRequest{Slots: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetNodes()) != 2 {
			t.Fatalf("replica %d: %d nodes", i, len(got.GetNodes()))
		}
		n1, n2 := got.GetNodes()[0], got.GetNodes()[1]
		if !n1.GetKnown() || n1.GetKeys() != uint64(keys) || n1.GetBytes() != bytes || len(n1.GetSlots()) != len(perSlot) {
			t.Fatalf("replica %d: n1 %v, want %d keys, %d bytes in %d slots", i, n1, keys, bytes, len(perSlot))
		}
		for _, s := range n1.GetSlots() {
			if perSlot[uint16(s.GetSlot())] != s.GetKeys() {
				t.Fatalf("replica %d: slot %d has %d keys, want %d", i, s.GetSlot(), s.GetKeys(), perSlot[uint16(s.GetSlot())])
			}
		}
		if n2.GetKnown() || n2.GetBytes() != 0 {
			t.Fatalf("replica %d: n2 %v, want unknown", i, n2)
		}
	}
	// n1's report under n2's name speaks of slots n2 does not own: refused
	// by both, and n2 stays unknown.
	bad, err := rep.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad.NodeId = "n2"
	for i, c := range replicas {
		if _, err := c.Report(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("replica %d: n1's slots as n2's: %v, want InvalidArgument", i, err)
		}
		got, err := c.Get(ctx, &slotdv1.GetLoadRequest{NodeIds: []string{"n2"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetNodes()) != 1 || got.GetNodes()[0].GetKnown() {
			t.Fatalf("replica %d: n2 %v after a refused report", i, got.GetNodes())
		}
	}
}
