package client

import (
	"errors"
	"fmt"
	"testing"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/api/slotmap"
	"github.com/slotd/slotd/internal/maptest"
	"github.com/slotd/slotd/slots"
)

// zoned is the test cluster of this file: three nodes in three zones.
var zoned = []slotmap.Node{
	{ID: "a", Addr: "10.0.0.1:7500", Zone: "z1", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
	{ID: "b", Addr: "10.0.0.2:7500", Zone: "z2", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
	{ID: "c", Addr: "10.0.0.3:7500", Zone: "z3", Weight: 1, State: slotdv1.NodeState_NODE_STATE_ACTIVE},
}

func replicaIDs(rs []slotmap.Replica) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return fmt.Sprint(out)
}

// TestReplicasFollowTheMap: a client's Replicas follows replica steps
// through the watch (deltas) and a reconnect (a full map), orders the
// in-sync replicas by the client's zone, never lists a learner, and
// leaves Route on the primary.
func TestReplicasFollowTheMap(t *testing.T) {
	m, err := maptest.RoundRobin(10, zoned)
	if err != nil {
		t.Fatal(err)
	}
	s := slots.MustNew(3) // a's in the round robin
	st := maptest.NewState(m)
	srv := startServer(t, st, "127.0.0.1:0")
	addr := srv.Addr()
	near := map[string]*Client{}
	for _, zone := range []string{"", "z2", "z3"} {
		near[zone] = newClientWith(t, func(o *Options) { o.Endpoints = []string{addr}; o.Zone = zone })
	}
	set := func(v uint64, rs slotmap.ReplicaSet) {
		t.Helper()
		next, err := maptest.SetReplicas(st.Map(), v, rs)
		if err != nil {
			t.Fatal(err)
		}
		st.Set(next)
	}
	check := func(v uint64, want map[string]string, primary string) {
		t.Helper()
		for zone, c := range near {
			eventually(t, fmt.Sprintf("version %d in zone %q", v, zone), versionIs(c, v))
			got, err := c.Replicas(s)
			if err != nil || replicaIDs(got) != want[zone] {
				t.Fatalf("version %d, zone %q: Replicas = %s, %v; want %s", v, zone, replicaIDs(got), err, want[zone])
			}
			if r, _ := c.RouteString(slotKey(s)); r.Owner() != primary {
				t.Fatalf("version %d: Route goes to %s, want the primary %s", v, r.Owner(), primary)
			}
		}
	}
	check(10, map[string]string{"": "[a]", "z2": "[a]", "z3": "[a]"}, "a")
	set(11, slotmap.ReplicaSet{Slot: s, ISR: []string{"a"}, Learners: []string{"b", "c"}})
	check(11, map[string]string{"": "[a]", "z2": "[a]", "z3": "[a]"}, "a")
	set(12, slotmap.ReplicaSet{Slot: s, Epoch: 12, ISR: []string{"a", "b"}, Learners: []string{"c"}})
	check(12, map[string]string{"": "[a b]", "z2": "[b a]", "z3": "[a b]"}, "a")
	set(13, slotmap.ReplicaSet{Slot: s, Epoch: 13, ISR: []string{"a", "b", "c"}})
	check(13, map[string]string{"": "[a b c]", "z2": "[b a c]", "z3": "[c a b]"}, "a")

	// A transfer of the primary published while the clients are cut off
	// reaches them in the full map of their next watch.
	srv.Stop()
	set(14, slotmap.ReplicaSet{Slot: s, Epoch: 14, ISR: []string{"c", "a", "b"}})
	srv = startServer(t, st, addr)
	defer srv.Stop()
	check(14, map[string]string{"": "[c a b]", "z2": "[b c a]", "z3": "[c a b]"}, "c")
}

// slotKey returns a key of slot s.
func slotKey(s slots.Slot) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("k%d", i); slots.ForString(k) == s {
			return k
		}
	}
}

func TestReplicasWithoutOwners(t *testing.T) {
	empty, err := slotmap.New(slotmap.Snapshot{Version: 1, ClusterID: "maptest", Nodes: zoned})
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, maptest.NewState(empty), "127.0.0.1:0")
	defer srv.Stop()
	c := newClientWith(t, func(o *Options) { o.Endpoints = []string{srv.Addr()}; o.Zone = "z1" })
	if rs, err := c.Replicas(slots.MustNew(0)); !errors.Is(err, ErrNoMap) || rs != nil {
		t.Fatalf("Replicas on a map without owners = %v, %v; want ErrNoMap", rs, err)
	}
}
