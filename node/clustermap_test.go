package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/client"
	"github.com/slotd/slotd/internal/maptest"
	"github.com/slotd/slotd/internal/waitfor"
	"github.com/slotd/slotd/slots"
)

// runClusterMap runs a ClusterMap on opts until the test ends.
func runClusterMap(t *testing.T, opts client.Options) *ClusterMap {
	t.Helper()
	cm, err := NewClusterMap(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return cm
}

// TestClusterMapFollowsDirectory: a ClusterMap has no map while slotd is
// down, picks one up once slotd serves, and follows a move.
func TestClusterMapFollowsDirectory(t *testing.T) {
	nodes := []slotmap.Node{{ID: "a", Addr: "127.0.0.1:7501"}, {ID: "b", Addr: "127.0.0.1:7502"}}
	m1, err := maptest.RoundRobin(10, nodes)
	if err != nil {
		t.Fatal(err)
	}
	st := maptest.NewState(m1)
	srv, err := maptest.Start(st, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	srv.Stop() // slotd is down when the node starts

	cm := runClusterMap(t, client.Options{Endpoints: []string{addr}, ReconnectBackoff: time.Millisecond, MaxReconnectBackoff: 20 * time.Millisecond})
	s := slots.MustNew(4) // a in the round robin
	if _, ok := cm.Owner(s); ok {
		t.Fatal("an owner before any map")
	}
	srv, err = maptest.Start(st, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitOwner := func(want Owner) {
		t.Helper()
		waitfor.Err(t, 20*time.Second, "the owner", func() error {
			if got, ok := cm.Owner(s); !ok || got != want {
				return fmt.Errorf("owner %+v (ok %v), want %+v", got, ok, want)
			}
			return nil
		})
	}
	waitOwner(Owner{ID: "a", Addr: "127.0.0.1:7501", Version: 10})
	m2, err := maptest.Move(m1, 11, s, "b")
	if err != nil {
		t.Fatal(err)
	}
	st.Set(m2)
	waitOwner(Owner{ID: "b", Addr: "127.0.0.1:7502", Version: 11})
}

// TestWriteToReplicaIsMoved: with replica sets in the map, a node in a
// slot's ISR that is not its primary answers a write, and a read, MOVED to
// the primary at the version of the map it holds (at or past the epoch
// that made that primary), as a node outside the set does; once a primary
// transfer reaches it, it serves the slot and the old primary redirects.
func TestWriteToReplicaIsMoved(t *testing.T) {
	nodes := []slotmap.Node{
		{ID: "a", Addr: "127.0.0.1:7501", Zone: "z1"},
		{ID: "b", Addr: "127.0.0.1:7502", Zone: "z2"},
		{ID: "c", Addr: "127.0.0.1:7503", Zone: "z3"},
	}
	key := "{replica}:1"
	s := slots.ForString(key)
	m0, err := maptest.RoundRobin(10, nodes)
	if err != nil {
		t.Fatal(err)
	}
	primary := m0.OwnerID(s)
	var follower, learner string
	for _, n := range nodes {
		switch {
		case n.ID == primary:
		case follower == "":
			follower = n.ID
		default:
			learner = n.ID
		}
	}
	m1, err := maptest.SetReplicas(m0, 11, slotmap.ReplicaSet{Slot: s, Epoch: 11, ISR: []string{primary, follower}, Learners: []string{learner}})
	if err != nil {
		t.Fatal(err)
	}
	st := maptest.NewState(m1)
	srv, err := maptest.Start(st, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cm := runClusterMap(t, client.Options{Endpoints: []string{srv.Addr()}})
	waitVersion := func(v uint64) {
		t.Helper()
		waitfor.True(t, 20*time.Second, fmt.Sprintf("map version %d", v), func() bool {
			mp := cm.Map()
			return mp != nil && mp.Version() == v
		})
	}
	waitVersion(11)
	if rs := cm.Map().ReplicaSet(s); len(rs.ISR) != 2 || rs.Learners[0] != learner {
		t.Fatalf("the node's map lost the replica set: %+v", rs)
	}
	addr := func(id string) string { n, _ := cm.Map().Node(id); return n.Addr }
	nodeOf := map[string]*Node{}
	for _, n := range nodes {
		nd, err := New(Config{ID: n.ID, Store: newMemStore(), Map: cm, StateDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer nd.Close()
		nodeOf[n.ID] = nd
	}
	check := func(v uint64, primary string) {
		t.Helper()
		bg := context.Background()
		if err := nodeOf[primary].Write(bg, []byte(key), put(key, "x")); err != nil {
			t.Fatalf("write to the primary %s: %v", primary, err)
		}
		for _, id := range []string{"a", "b", "c"} {
			if id == primary {
				continue
			}
			var re *RedirectError
			for what, err := range map[string]error{
				"write": nodeOf[id].Write(bg, []byte(key), put(key, "y")),
				"read":  nodeOf[id].CheckRead([]byte(key)),
			} {
				if !errors.As(err, &re) || re.Kind != Moved || re.Owner != primary || re.Addr != addr(primary) || re.Version != v || re.Slot != s {
					t.Fatalf("%s to %s at version %d: %v, want MOVED to %s at %d", what, id, v, err, primary, v)
				}
			}
		}
	}
	check(11, primary)

	// The follower becomes primary; the old primary stays in sync.
	m2, err := maptest.SetReplicas(m1, 12, slotmap.ReplicaSet{Slot: s, Epoch: 12, ISR: []string{follower, primary}, Learners: []string{learner}})
	if err != nil {
		t.Fatal(err)
	}
	st.Set(m2)
	waitVersion(12)
	check(12, follower)
}
