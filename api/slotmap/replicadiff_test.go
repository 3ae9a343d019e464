package slotmap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// TestReplicaStepsDiffApply runs each replica step as the directory writes
// it and checks the delta names exactly the slot it changed (and, for a
// primary transfer, its new owner), and applying it gives the next map.
func TestReplicaStepsDiffApply(t *testing.T) {
	nodes := testNodes(6) // zones a b c a b c
	s := slots.MustNew(300)
	owners := make([]string, slots.Count)
	for i := range owners {
		owners[i] = nodes[i%3].ID
	}
	build := func(v uint64, owner string, sets ...ReplicaSet) *Map {
		t.Helper()
		o := slices.Clone(owners)
		o[s.Int()] = owner
		m, err := New(Snapshot{Version: v, ClusterID: "c1", Nodes: nodes, Owners: o, Replicas: sets})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	o := owners[s.Int()] // store-000, zone a
	steps := []struct {
		name string
		next *Map
	}{
		{"add learner", build(11, o, ReplicaSet{Slot: s, ISR: []string{o}, Learners: []string{"store-001"}})},
		{"join isr", build(12, o, ReplicaSet{Slot: s, Epoch: 12, ISR: []string{o, "store-001"}})},
		{"add learner", build(13, o, ReplicaSet{Slot: s, Epoch: 12, ISR: []string{o, "store-001"}, Learners: []string{"store-005"}})},
		{"join isr", build(14, o, ReplicaSet{Slot: s, Epoch: 14, ISR: []string{o, "store-001", "store-005"}})},
		{"transfer primary", build(15, "store-005", ReplicaSet{Slot: s, Epoch: 15, ISR: []string{"store-005", o, "store-001"}})},
		{"remove replica", build(16, "store-005", ReplicaSet{Slot: s, Epoch: 16, ISR: []string{"store-005", "store-001"}})},
		{"shrink isr", build(17, "store-005", ReplicaSet{Slot: s, Epoch: 17, ISR: []string{"store-005"}, Learners: []string{"store-001"}})},
		{"remove learner", build(18, "store-005", ReplicaSet{Slot: s, Epoch: 17, ISR: []string{"store-005"}})},
	}
	prev := build(10, o)
	client := prev
	for _, st := range steps {
		d := Diff(prev, st.next)
		if len(d.GetReplicas()) != 1 || d.GetReplicas()[0].GetSlot() != uint32(s.Int()) {
			t.Fatalf("%s: delta carries sets %v, want slot %d's alone", st.name, d.GetReplicas(), s.Int())
		}
		wantOwners := 0
		if st.next.OwnerID(s) != prev.OwnerID(s) {
			wantOwners = 1
		}
		if len(d.GetSlots()) != wantOwners {
			t.Fatalf("%s: delta carries %d owners, want %d", st.name, len(d.GetSlots()), wantOwners)
		}
		var err error
		if client, err = client.Apply(d); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !client.Equal(st.next) {
			t.Fatalf("%s: applied map differs from the directory's", st.name)
		}
		prev = st.next
	}
	// Back to the owner alone at epoch 0 is no stored set at all.
	last := build(19, "store-005")
	d := Diff(prev, last)
	if r := d.GetReplicas(); len(r) != 1 || r[0].GetEpoch() != 0 || len(r[0].GetFollowers())+len(r[0].GetLearners()) != 0 {
		t.Fatalf("clearing delta: %v", r)
	}
	got, err := client.Apply(d)
	if err != nil || !got.Equal(last) || got.HasReplicas() {
		t.Fatalf("clearing delta: err %v, equal %v, has replicas %v", err, err == nil && got.Equal(last), err == nil && got.HasReplicas())
	}
}

// TestReplicaDiffRandom diffs random pairs of replicated maps whose node
// tables differ (appended, reordered, changed) and whose sets differ in a
// few slots or many: the delta names exactly the slots whose set changed,
// and applying it gives the second map.
func TestReplicaDiffRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 100 {
		nodes := testNodes(3 + r.IntN(9))
		a := replicatedMap(t, 10, nodes, 1+r.IntN(3), r.IntN(2) == 0, uint64(i))
		next := slices.Clone(nodes)
		switch r.IntN(4) {
		case 1:
			next = append(next, Node{ID: fmt.Sprintf("new-%d", i), Addr: "10.9.9.9:7500", Zone: "zone-a"})
		case 2:
			r.Shuffle(len(next), func(x, y int) { next[x], next[y] = next[y], next[x] })
		case 3:
			next[r.IntN(len(next))].Addr = "10.8.8.8:7600"
		}
		b := replicatedMap(t, 11, nodes, 1+r.IntN(3), r.IntN(2) == 0, uint64(i)+1000)
		owners := make([]string, slots.Count)
		var sets []ReplicaSet
		changes := r.IntN(3) * r.IntN(200)
		var want []uint32
		for s := range slots.Count {
			sl := slots.MustNew(s)
			from := a
			if r.IntN(slots.Count) < changes {
				from = b
			}
			owners[s] = from.OwnerID(sl)
			rs := from.ReplicaSet(sl)
			rs.Epoch += uint64(s % 2) // epoch moves in half the changed slots
			if from == a {
				rs.Epoch = a.ReplicaSet(sl).Epoch
			}
			sets = append(sets, rs)
			if old := a.ReplicaSet(sl); old.Epoch != rs.Epoch || !slices.Equal(old.ISR[1:], rs.ISR[1:]) || !slices.Equal(old.Learners, rs.Learners) {
				want = append(want, uint32(s))
			}
		}
		c, err := New(Snapshot{Version: 11, ClusterID: "c1", Nodes: next, Owners: owners, Replicas: sets})
		if err != nil {
			t.Fatal(err)
		}
		d := Diff(a, c)
		var got []uint32
		for _, rs := range d.GetReplicas() {
			got = append(got, rs.GetSlot())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pair %d: delta names %d sets, want the %d that changed", i, len(got), len(want))
		}
		if m, err := a.Apply(d); err != nil || !m.Equal(c) {
			t.Fatalf("pair %d: Apply(Diff(a, c)) = %v, equal %v; want c", i, err, err == nil && m.Equal(c))
		}
	}
}

// TestReplicasAfterRemoveAndCompact: a node removed by a delta must leave
// every set it was in through the same delta, and a placeholder node
// dropped from a patched map's table shifts indexes without changing any
// set.
func TestReplicasAfterRemoveAndCompact(t *testing.T) {
	nodes := testNodes(7)
	a := replicatedMap(t, 10, nodes[:6], 2, false, 4)
	// Register a seventh node, then remove it again with no set naming it.
	withNew, err := New(Snapshot{Version: 11, ClusterID: "c1", Nodes: nodes, OwnerIndexes: ownerIndexes(a), Replicas: a.ReplicaSets()})
	if err != nil {
		t.Fatal(err)
	}
	d := Diff(a, withNew)
	b, err := a.Apply(d)
	if err != nil || !b.Equal(withNew) {
		t.Fatalf("add node: %v", err)
	}
	// A redirect adds a placeholder node; a node appended by the next
	// delta, and named in a set, sits after it in the client's table.
	p, _ := b.WithOwner(slots.MustNew(0), "", "10.7.7.7:7500", 100)
	next := append(slices.Clone(nodes), Node{ID: "late", Addr: "10.6.6.6:7500", Zone: "zone-z"})
	sets := withNew.ReplicaSets()
	sets[1].Learners = append(sets[1].Learners, "late")
	c, err := New(Snapshot{Version: 12, ClusterID: "c1", Nodes: next, OwnerIndexes: ownerIndexes(withNew), Replicas: sets})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := p.Apply(Diff(withNew, c))
	if err != nil {
		t.Fatal(err)
	}
	if got := pc.ReplicaSet(slots.MustNew(1)); !slices.Contains(got.Learners, "late") {
		t.Fatalf("slot 1 on the patched map: %+v, want learner late", got)
	}
	// A delta past the redirect gives slot 0 its owner: the placeholder
	// goes, "late" moves down one index, and every set stays.
	owners := ownersOf(c)
	x := c.ReplicaSet(slots.MustNew(0))
	owners[0] = x.ISR[1]
	sets[0] = ReplicaSet{Slot: slots.MustNew(0), Epoch: 101, ISR: []string{x.ISR[1], x.ISR[0]}}
	past, err := New(Snapshot{Version: 101, ClusterID: "c1", Nodes: next, Owners: owners, Replicas: sets})
	if err != nil {
		t.Fatal(err)
	}
	got, err := pc.Apply(Diff(c, past))
	if err != nil || !got.Equal(past) {
		t.Fatalf("past the redirect: %v, equal %v", err, err == nil && got.Equal(past))
	}
	if n := len(got.Nodes()); n != len(next) {
		t.Fatalf("past the redirect: %d nodes, want %d (the placeholder gone)", n, len(next))
	}

	// Removing a node that holds a replica: the delta must give its slots
	// new sets.
	gone := slices.DeleteFunc(slices.Clone(next), func(n Node) bool { return n.ID == "late" })
	bad := &slotdv1.MapDelta{FromVersion: 12, Version: 13, RemovedNodes: []string{"late"}}
	if _, err := c.Apply(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("removal leaving a set short: %v, want ErrInvalid", err)
	}
	fixed, err := New(Snapshot{Version: 13, ClusterID: "c1", Nodes: gone, Owners: ownersOf(c), Replicas: withNew.ReplicaSets()})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Apply(Diff(c, fixed)); err != nil || !got.Equal(fixed) {
		t.Fatalf("removal with new sets: %v", err)
	}
}

func ownerIndexes(m *Map) []uint16 { return slices.Clone(m.owners.flat()[:]) }

func ownersOf(m *Map) []string {
	out := make([]string, slots.Count)
	for s := range out {
		out[s] = m.OwnerID(slots.MustNew(s))
	}
	return out
}
