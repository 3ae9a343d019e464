package grpcapi

import (
	"context"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/internal/etcdtest"
	"github.com/slotd/slotd/slots"
)

// testMap is a map at version v with slot s owned by "b" for every s < v
// and by "a" otherwise, so consecutive versions differ by one slot.
func testMap(t *testing.T, v uint64) *slotmap.Map {
	t.Helper()
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = "a"
		if uint64(s) < v {
			owners[s] = "b"
		}
	}
	m, err := slotmap.New(slotmap.Snapshot{Version: v, ClusterID: "t", Owners: owners, Nodes: []slotmap.Node{
		{ID: "a", Addr: "127.0.0.1:1", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
		{ID: "b", Addr: "127.0.0.1:2", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestHubSince(t *testing.T) {
	h, err := NewHub(HubConfig{Directory: newDir(t, etcdtest.New(t)), Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= 6; v++ {
		h.publish(testMap(t, v))
	}
	h.publish(testMap(t, 4)) // older: ignored
	tests := []struct {
		name  string
		known uint64
		ok    bool
		chain []uint64 // versions of the deltas to send
	}{
		{"up to date", 6, true, nil},
		{"one behind", 5, true, []uint64{6}},
		{"as far back as kept", 3, true, []uint64{4, 5, 6}},
		{"further back: full map", 2, false, nil},
		{"new watcher: full map", 0, false, nil},
		{"ahead of the hub: full map", 9, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur, chain, ok, _, closed := h.since(tc.known)
			if closed || cur.ver != 6 || ok != tc.ok {
				t.Fatalf("since(%d): version %d ok %v closed %v; want 6, %v, false", tc.known, cur.ver, ok, closed, tc.ok)
			}
			var got []uint64
			for _, v := range chain {
				got = append(got, v.ver)
				var u slotdv1.WatchMapResponse
				if err := proto.Unmarshal(v.delta.b, &u); err != nil {
					t.Fatal(err)
				}
				if d := u.GetDelta(); d.GetFromVersion() != v.from || d.GetVersion() != v.ver || len(d.GetSlots()) != 1 {
					t.Errorf("delta %d->%d with %d slots; want %d->%d with 1", d.GetFromVersion(), d.GetVersion(), len(d.GetSlots()), v.from, v.ver)
				}
			}
			if len(got) != len(tc.chain) || (len(got) > 0 && got[0] != tc.chain[0]) {
				t.Errorf("chain %v, want %v", got, tc.chain)
			}
		})
	}
}

// A watcher that stops reading holds back nobody: the others see every
// change, and once it reads again it catches up to the latest version.
func TestSlowWatcherDoesNotBlockOthers(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", func(c *Config) { c.Hub = newHub(t, d, 2) })
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	slow, err := slotdv1.NewDirectoryClient(dial(t, srv.addr())).WatchMap(ctx, &slotdv1.WatchMapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := slow.Recv()
	if err != nil || first.GetFull() == nil {
		t.Fatalf("first update %v, %v; want a full map", first, err)
	}
	fast := newClient(t, srv.addr())

	var last uint64
	for i := range 5 {
		last = moveSlot(t, d, 100+i, otherThan(t, d, 100+i))
		eventually(t, "the fast watcher sees the change", versionAtLeast(fast, last))
	}
	m, err := slotmap.FromProto(first.GetFull())
	if err != nil {
		t.Fatal(err)
	}
	for m.Version() < last {
		u, err := slow.Recv()
		if err == io.EOF || err != nil {
			t.Fatalf("slow watcher at version %d: %v", m.Version(), err)
		}
		if f := u.GetFull(); f != nil {
			if m, err = slotmap.FromProto(f); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if m, err = m.Apply(u.GetDelta()); err != nil {
			t.Fatalf("slow watcher got a delta that does not follow version %d: %v", m.Version(), err)
		}
	}
	if !m.Equal(srv.svc.hub.Current()) {
		t.Errorf("slow watcher's map at version %d differs from the hub's", m.Version())
	}
}

// A watcher reconnecting with the version it holds gets the deltas since,
// not the full map.
func TestWatchResumesFromKnownVersion(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", nil)
	eventually(t, "hub has the map", func() bool { return srv.svc.hub.Current() != nil })
	known := srv.svc.hub.Current().Version()
	v := moveSlot(t, d, 5, otherThan(t, d, 5))
	eventually(t, "hub at the move", func() bool { return srv.svc.hub.Current().Version() == v })

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	w, err := slotdv1.NewDirectoryClient(dial(t, srv.addr())).WatchMap(ctx, &slotdv1.WatchMapRequest{KnownVersion: known})
	if err != nil {
		t.Fatal(err)
	}
	// The move is three versions: begin, fence, commit.
	next := known
	for next < v {
		u, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		dl := u.GetDelta()
		if dl == nil || dl.GetFromVersion() != next {
			t.Fatalf("update %v; want a delta from version %d", u, next)
		}
		next = dl.GetVersion()
	}
}

// Stopping the hub ends every watch stream with UNAVAILABLE, so clients
// move to another replica and a graceful stop does not wait for them.
func TestStopEndsWatchStreams(t *testing.T) {
	d := newDir(t, etcdtest.New(t))
	bootstrap(t, d)
	srv := startServer(t, d, "127.0.0.1:0", nil)
	w, err := slotdv1.NewDirectoryClient(dial(t, srv.addr())).WatchMap(testCtx(t), &slotdv1.WatchMapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	srv.stop()
	_, err = w.Recv()
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "shutting down") {
		t.Errorf("watch after stop: %v; want UNAVAILABLE saying slotd is shutting down", err)
	}
}
