package slotmap

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// replicatedMap returns a map of nodes (testNodes: zones a, b, c in turn)
// in which every slot has rf replicas in distinct zones, the first rf-1
// after the owner in sync and, when learner is set, one more learner; the
// epoch of slot s is version-s%7 (0 for some).
func replicatedMap(t testing.TB, version uint64, nodes []Node, rf int, learner bool, seed uint64) *Map {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	owners := make([]string, slots.Count)
	sets := make([]ReplicaSet, 0, slots.Count)
	for s := range owners {
		var isr []string
		zones := map[string]bool{}
		for _, i := range r.Perm(len(nodes)) {
			if n := nodes[i]; !zones[n.Zone] {
				zones[n.Zone] = true
				isr = append(isr, n.ID)
			}
		}
		want := rf
		if learner {
			want++
		}
		isr = isr[:min(want, len(isr))]
		rs := ReplicaSet{Slot: slots.MustNew(s), Epoch: version - uint64(s%7), ISR: isr}
		if learner && len(isr) > 1 {
			rs.ISR, rs.Learners = isr[:len(isr)-1], isr[len(isr)-1:]
		}
		owners[s] = isr[0]
		sets = append(sets, rs)
	}
	m, err := New(Snapshot{Version: version, ClusterID: "c1", Nodes: nodes, Owners: owners, Replicas: sets})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// roundTrip encodes m, decodes it and checks the result equals m.
func roundTrip(t *testing.T, m *Map) *Map {
	t.Helper()
	wire, err := proto.Marshal(m.Proto())
	if err != nil {
		t.Fatal(err)
	}
	var pb slotdv1.SlotMap
	if err := proto.Unmarshal(wire, &pb); err != nil {
		t.Fatal(err)
	}
	back, err := FromProto(&pb)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(m) {
		t.Fatal("decoded map differs from the original")
	}
	return back
}

func TestReplicaWireRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		nodes   int
		rf      int
		learner bool
	}{
		{"3 nodes rf 3", 3, 3, false},
		{"9 nodes rf 3", 9, 3, false},
		{"9 nodes rf 2 and a learner", 9, 2, true},
		{"200 nodes rf 3", 200, 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := replicatedMap(t, 500, testNodes(tc.nodes), tc.rf, tc.learner, 1)
			back := roundTrip(t, m)
			for s := range slots.Count {
				sl := slots.MustNew(s)
				g, w := back.ReplicaSet(sl), m.ReplicaSet(sl)
				if g.Epoch != w.Epoch || !slices.Equal(g.ISR, w.ISR) || !slices.Equal(g.Learners, w.Learners) {
					t.Fatalf("slot %d: set %+v, want %+v", s, g, w)
				}
				if g.Primary() != back.OwnerID(sl) {
					t.Fatalf("slot %d: primary %q is not the owner %q", s, g.Primary(), back.OwnerID(sl))
				}
			}
			size := proto.Size(m.Proto())
			t.Logf("%d nodes, rf %d: %d bytes on the wire (%d without the replica sets)", tc.nodes, tc.rf, size, size-len(m.Proto().GetReplicas()))
		})
	}
}

// TestNoReplicasEncodesAsBefore: a map whose sets are all their owner
// alone at epoch 0 (rf 1) has no replica table, and its encoding and its
// deltas carry no replica field: the bytes are those of a map before
// replica sets.
func TestNoReplicasEncodesAsBefore(t *testing.T) {
	nodes := testNodes(5)
	a := testMap(t, 10, nodes, 3)
	var implied []ReplicaSet
	for s := range slots.Count {
		sl := slots.MustNew(s)
		implied = append(implied, ReplicaSet{Slot: sl, ISR: []string{a.OwnerID(sl)}})
	}
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = a.OwnerID(slots.MustNew(s))
	}
	b, err := New(Snapshot{Version: 10, ClusterID: "c1", Nodes: nodes, Owners: owners, Replicas: implied})
	if err != nil {
		t.Fatal(err)
	}
	if b.HasReplicas() || len(b.ReplicaSets()) != 0 {
		t.Fatal("sets of the owner alone at epoch 0 make a replica table")
	}
	wa, _ := proto.Marshal(a.Proto())
	wb, _ := proto.Marshal(b.Proto())
	if !slices.Equal(wa, wb) {
		t.Fatal("implied sets change the encoding")
	}
	// The bytes are those of the message without field 7.
	old := a.Proto()
	old.Replicas = nil
	if wo, _ := proto.Marshal(old); !slices.Equal(wo, wa) {
		t.Fatal("a map at rf 1 writes the replicas field")
	}
	next := withOwners(t, a, 11, nodes, map[int]string{5: nodes[0].ID})
	if d := Diff(a, next); len(d.GetReplicas()) != 0 {
		t.Fatalf("a delta at rf 1 carries %d replica sets", len(d.GetReplicas()))
	}
}

func TestReplicasNearestZoneFirst(t *testing.T) {
	nodes := []Node{
		{ID: "a1", Addr: "10.0.0.1:7500", Zone: "a"},
		{ID: "b1", Addr: "10.0.0.2:7500", Zone: "b"},
		{ID: "c1", Addr: "10.0.0.3:7500", Zone: "c"},
		{ID: "d1", Addr: "10.0.0.4:7500", Zone: "d"},
	}
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = "b1"
	}
	s, alone := slots.MustNew(7), slots.MustNew(8)
	m, err := New(Snapshot{Version: 9, Nodes: nodes, Owners: owners, Replicas: []ReplicaSet{
		{Slot: s, Epoch: 9, ISR: []string{"b1", "a1", "c1"}, Learners: []string{"d1"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(rs []Replica) []string {
		var out []string
		for _, r := range rs {
			id := r.ID
			if r.Primary {
				id += "*"
			}
			out = append(out, id)
		}
		return out
	}
	tests := []struct {
		slot slots.Slot
		zone string
		want []string
	}{
		{s, "", []string{"b1*", "a1", "c1"}},
		{s, "a", []string{"a1", "b1*", "c1"}},
		{s, "b", []string{"b1*", "a1", "c1"}},
		{s, "c", []string{"c1", "b1*", "a1"}},
		{s, "d", []string{"b1*", "a1", "c1"}}, // a learner is never read from
		{s, "elsewhere", []string{"b1*", "a1", "c1"}},
		{alone, "a", []string{"b1*"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("slot %d zone %q", tc.slot.Int(), tc.zone), func(t *testing.T) {
			got := m.Replicas(tc.slot, tc.zone)
			if !slices.Equal(ids(got), tc.want) {
				t.Fatalf("Replicas = %v, want %v", ids(got), tc.want)
			}
			for _, r := range got {
				if n, _ := m.Node(r.ID); n.Addr != r.Addr || n.Zone != r.Zone {
					t.Fatalf("replica %+v does not match its node %+v", r, n)
				}
			}
		})
	}
	if got := new(Map).Replicas(s, "a"); got != nil {
		t.Fatalf("a map without owners gives replicas %v", got)
	}

	// A redirect to the follower in zone c (a transfer the map has not
	// seen): the slot is its new owner alone until the map catches up.
	p, ok := m.WithOwner(s, "c1", "10.0.0.3:7500", 12)
	if !ok {
		t.Fatal("redirect not applied")
	}
	if got := ids(p.Replicas(s, "a")); !slices.Equal(got, []string{"c1*"}) {
		t.Fatalf("patched slot: Replicas = %v, want [c1*]", got)
	}
	if rs := p.ReplicaSet(s); rs.Epoch != 0 || !slices.Equal(rs.ISR, []string{"c1"}) || rs.Learners != nil {
		t.Fatalf("patched slot: ReplicaSet = %+v", rs)
	}
}
