package client

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/internal/maptest"
	"github.com/slotd/slotd/slots"
)

func TestServerRestartReconnectsAndCatchesUp(t *testing.T) {
	st := maptest.NewState(baseMap(t, 10))
	srv := startServer(t, st, "127.0.0.1:0")
	addr := srv.Addr()
	c := newClient(t, nil, addr)

	srv.Stop()
	// Changes made while the server is down arrive after it returns.
	st.Set(moved(t, st.Map(), 11, slots.MustNew(1), "a"))
	st.Set(moved(t, st.Map(), 12, slots.MustNew(2), "a"))
	srv = startServer(t, st, addr)
	defer srv.Stop()
	eventually(t, "version 12 after restart", versionIs(c, 12))
	if got := c.Map().OwnerID(slots.MustNew(2)); got != "a" {
		t.Fatalf("owner of slot 2 = %q, want a", got)
	}
	// And the new stream keeps delivering.
	st.Set(moved(t, st.Map(), 13, slots.MustNew(3), "a"))
	eventually(t, "version 13", versionIs(c, 13))
	if testutil.ToFloat64(c.m.reconnects) < 1 {
		t.Fatal("no reconnect counted")
	}
}

func TestFailoverAcrossEndpoints(t *testing.T) {
	st := maptest.NewState(baseMap(t, 10))
	one := startServer(t, st, "127.0.0.1:0")
	two := startServer(t, st, "127.0.0.1:0")
	defer two.Stop()
	c := newClient(t, nil, one.Addr(), two.Addr())
	if one.WatchCalls() != 1 {
		t.Fatalf("watch streams on the first endpoint = %d, want 1", one.WatchCalls())
	}
	one.Stop() // one stays down for the rest of the test
	st.Set(moved(t, st.Map(), 11, slots.MustNew(7), "c"))
	eventually(t, "version 11 through the second endpoint", versionIs(c, 11))
	if two.WatchCalls() < 1 {
		t.Fatal("the client never watched the second endpoint")
	}
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh with one endpoint down: %v", err)
	}
}

func TestClusterMismatchIsRefused(t *testing.T) {
	st := maptest.NewState(baseMap(t, 10))
	srv := startServer(t, st, "127.0.0.1:0")
	defer srv.Stop()
	c := newClient(t, nil, srv.Addr())

	owners := make([]string, slots.Count)
	for i := range owners {
		owners[i] = "a"
	}
	foreign, err := slotmap.New(slotmap.Snapshot{Version: 50, ClusterID: "other", Nodes: testNodes, Owners: owners})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.replace(foreign, sourceFetch); !errors.Is(err, ErrClusterMismatch) {
		t.Fatalf("replace = %v, want ErrClusterMismatch", err)
	}
	if c.Map().Version() != 10 {
		t.Fatal("a foreign map was installed")
	}
}

func TestSubscribeAfterClose(t *testing.T) {
	st := maptest.NewState(baseMap(t, 1))
	srv := startServer(t, st, "127.0.0.1:0")
	defer srv.Stop()
	c := newClient(t, nil, srv.Addr())
	maps, cancel := c.Subscribe()
	<-maps
	c.Close()
	if _, ok := <-maps; ok {
		t.Fatal("subscription channel still open after Close")
	}
	cancel() // harmless after Close
	late, _ := c.Subscribe()
	if _, ok := <-late; ok {
		t.Fatal("subscription after Close is open")
	}
}

func TestLaggingEndpointDoesNotRollBack(t *testing.T) {
	ahead := maptest.NewState(baseMap(t, 10))
	behind := maptest.NewState(baseMap(t, 5))
	one := startServer(t, ahead, "127.0.0.1:0")
	two := startServer(t, behind, "127.0.0.1:0")
	defer two.Stop()
	c := newClient(t, nil, one.Addr(), two.Addr())
	eventually(t, "version 10", versionIs(c, 10))
	one.Stop()
	// The client now only reaches an endpoint behind it: it keeps its map
	// and keeps trying (with backoff) until that endpoint catches up.
	eventually(t, "a watch on the lagging endpoint", func() bool { return two.WatchCalls() >= 2 })
	if v := c.Map().Version(); v != 10 {
		t.Fatalf("map rolled back to %d", v)
	}
	behind.Set(moved(t, baseMap(t, 10), 11, slots.MustNew(1), "a"))
	eventually(t, "version 11 once the endpoint caught up", versionIs(c, 11))
}
