package slotmap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// testNodes returns n nodes with realistic ids and addresses.
func testNodes(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{
			ID:     fmt.Sprintf("store-%03d", i),
			Addr:   fmt.Sprintf("10.%d.%d.%d:7500", i/65536, i/256%256, i%256),
			Zone:   fmt.Sprintf("zone-%c", 'a'+i%3),
			Weight: 1,
			State:  slotdv1.NodeState_NODE_STATE_ACTIVE,
		}
	}
	return nodes
}

// testMap spreads the slots over the nodes pseudo-randomly (like a ring
// does), so the packed owners do not compress into runs.
func testMap(t testing.TB, version uint64, nodes []Node, seed uint64) *Map {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = nodes[r.IntN(len(nodes))].ID
	}
	m, err := New(Snapshot{Version: version, ClusterID: "c1", Nodes: nodes, Owners: owners})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWireRoundTripAndSize(t *testing.T) {
	tests := []struct {
		nodes    int
		wantBits uint32
	}{
		{1, 1}, {2, 1}, {3, 2}, {16, 4}, {17, 5}, {200, 8}, {256, 8}, {257, 9}, {500, 9},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.nodes), func(t *testing.T) {
			m := testMap(t, 42, testNodes(tc.nodes), uint64(tc.nodes))
			pb := m.Proto()
			if pb.OwnerBits != tc.wantBits {
				t.Fatalf("owner_bits = %d, want %d", pb.OwnerBits, tc.wantBits)
			}
			// The contract: a full map fits in 40 KiB on the wire.
			if size := proto.Size(pb); size > 40<<10 {
				t.Fatalf("%d nodes: full map is %d bytes on the wire, limit %d", tc.nodes, size, 40<<10)
			}
			got := roundTrip(t, m)
			for s := range slots.Count {
				sl := slots.MustNew(s)
				g, w := got.RouteSlot(sl), m.RouteSlot(sl)
				if g.Owner() != w.Owner() || g.Addr() != w.Addr() || g.Version != w.Version {
					t.Fatalf("slot %d: route %s@%s, want %s@%s", s, g.Owner(), g.Addr(), w.Owner(), w.Addr())
				}
			}
		})
	}
}

func TestFromProtoRejects(t *testing.T) {
	good := testMap(t, 3, testNodes(3), 1).Proto()
	tests := []struct {
		name   string
		mutate func(pb *slotdv1.SlotMap)
	}{
		{"too few bits", func(pb *slotdv1.SlotMap) { pb.OwnerBits = 1; pb.Owners = pb.Owners[:slots.Count/8] }},
		{"too many bits", func(pb *slotdv1.SlotMap) { pb.OwnerBits = 17 }},
		{"short owners", func(pb *slotdv1.SlotMap) { pb.Owners = pb.Owners[:10] }},
		{"index past table", func(pb *slotdv1.SlotMap) { pb.Owners[0] |= 3 }}, // index 3, only 3 nodes
		{"duplicate node", func(pb *slotdv1.SlotMap) { pb.Nodes[1].Id = pb.Nodes[0].Id }},
		{"empty node id", func(pb *slotdv1.SlotMap) { pb.Nodes[2].Id = "" }},
		{"owners without nodes", func(pb *slotdv1.SlotMap) { pb.Nodes = nil }},
		{"move of slot 99999", func(pb *slotdv1.SlotMap) {
			pb.Migrations = []*slotdv1.Migration{{Slot: 99999, From: "store-000", To: "store-001"}}
		}},
		{"move to unknown node", func(pb *slotdv1.SlotMap) {
			pb.Migrations = []*slotdv1.Migration{{Slot: 1, From: "store-000", To: "nope"}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pb := proto.Clone(good).(*slotdv1.SlotMap)
			tc.mutate(pb)
			if _, err := FromProto(pb); !errors.Is(err, ErrInvalid) {
				t.Fatalf("FromProto error = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestNotBootstrapped(t *testing.T) {
	m, err := New(Snapshot{Version: 2, ClusterID: "c1", Nodes: testNodes(2)})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Empty() || m.Route([]byte("k")).OK() || m.OwnerID(slots.MustNew(1)) != "" {
		t.Fatal("a map without owners must route nowhere")
	}
	back, err := FromProto(m.Proto())
	if err != nil || !back.Equal(m) {
		t.Fatalf("round trip of an unassigned map: %v", err)
	}
	// The bootstrap delta assigns every slot.
	boot := testMap(t, 3, testNodes(2), 9)
	got, err := m.Apply(Diff(m, boot))
	if err != nil || !got.Equal(boot) {
		t.Fatalf("applying the bootstrap delta: %v", err)
	}
	partial := Diff(m, boot)
	partial.Slots = partial.Slots[1:]
	if _, err := m.Apply(partial); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a bootstrap delta missing a slot: error = %v, want ErrInvalid", err)
	}
}

func TestDiffApply(t *testing.T) {
	nodes := testNodes(5)
	a := testMap(t, 10, nodes, 1)
	tests := []struct {
		name string
		next func() *Map
	}{
		{"one slot moves", func() *Map { return withOwners(t, a, 11, nodes, map[int]string{7: "store-004"}) }},
		{"node added and filled", func() *Map {
			n := append(testNodes(5), Node{ID: "store-new", Addr: "10.9.9.9:7500", Weight: 2})
			return withOwners(t, a, 12, n, map[int]string{0: "store-new", 16383: "store-new"})
		}},
		{"node changes address", func() *Map {
			n := testNodes(5)
			n[2].Addr = "10.7.7.7:7600"
			return withOwners(t, a, 12, n, nil)
		}},
		{"move in flight", func() *Map {
			m := withOwners(t, a, 12, nodes, nil)
			m.migrations = []Migration{{Slot: slots.MustNew(5), From: a.OwnerID(slots.MustNew(5)), To: "store-000", Phase: slotdv1.MovePhase_MOVE_PHASE_COPYING, MoveID: "m1"}}
			return m
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.next()
			d := Diff(a, b)
			got, err := a.Apply(d)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(b) {
				t.Fatal("Apply(Diff(a, b)) != b")
			}
			// The delta travels the wire too.
			wire, _ := proto.Marshal(d)
			var back slotdv1.MapDelta
			if err := proto.Unmarshal(wire, &back); err != nil {
				t.Fatal(err)
			}
			if got, err := a.Apply(&back); err != nil || !got.Equal(b) {
				t.Fatalf("Apply(decoded delta): %v", err)
			}
		})
	}
}

func TestRemoveNode(t *testing.T) {
	a := testMap(t, 10, testNodes(3), 2)
	gone := "store-002"
	owned := a.SlotsOf(gone)
	reassign := map[int]string{}
	for s := range owned.All() {
		reassign[s.Int()] = "store-000"
	}
	b := withOwners(t, a, 11, testNodes(2), reassign)
	d := Diff(a, b)
	if len(d.RemovedNodes) != 1 || d.RemovedNodes[0] != gone {
		t.Fatalf("removed = %v", d.RemovedNodes)
	}
	got, err := a.Apply(d)
	if err != nil || !got.Equal(b) {
		t.Fatalf("Apply: %v", err)
	}
	// Removing a node that still owns slots is malformed.
	bad := &slotdv1.MapDelta{FromVersion: 10, Version: 11, RemovedNodes: []string{gone}}
	if _, err := a.Apply(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("error = %v, want ErrInvalid", err)
	}
}

func TestApplyRejects(t *testing.T) {
	a := testMap(t, 10, testNodes(3), 3)
	tests := []struct {
		name string
		d    *slotdv1.MapDelta
		want error
	}{
		{"gap", &slotdv1.MapDelta{FromVersion: 9, Version: 11}, ErrGap},
		{"backwards", &slotdv1.MapDelta{FromVersion: 10, Version: 10}, ErrInvalid},
		{"slot 99999", &slotdv1.MapDelta{FromVersion: 10, Version: 11, Slots: []*slotdv1.SlotOwner{{Slot: 99999, Owner: "store-000"}}}, ErrInvalid},
		{"unknown owner", &slotdv1.MapDelta{FromVersion: 10, Version: 11, Slots: []*slotdv1.SlotOwner{{Slot: 1, Owner: "ghost"}}}, ErrInvalid},
		{"empty node id", &slotdv1.MapDelta{FromVersion: 10, Version: 11, Nodes: []*slotdv1.Node{{Address: "h:1"}}}, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := a.Apply(tc.d); !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
			if a.Version() != 10 {
				t.Fatal("a failed Apply changed the map")
			}
		})
	}
}

func TestWithOwner(t *testing.T) {
	nodes := testNodes(3)
	a := testMap(t, 10, nodes, 4)
	s := slots.MustNew(100)
	other := "store-000"
	if a.OwnerID(s) == other {
		other = "store-001"
	}
	n, _ := a.Node(other)

	if _, ok := a.WithOwner(s, other, n.Addr, 10); ok {
		t.Fatal("a redirect at the map's own version must not patch it")
	}
	if _, ok := a.WithOwner(s, other, n.Addr, 9); ok {
		t.Fatal("an older redirect must not patch the map")
	}
	p, ok := a.WithOwner(s, other, n.Addr, 15)
	if !ok || p.OwnerID(s) != other || p.SlotVersion(s) != 15 || p.Version() != 10 {
		t.Fatalf("patched: ok=%v owner=%q slotVersion=%d version=%d", ok, p.OwnerID(s), p.SlotVersion(s), p.Version())
	}
	if a.OwnerID(s) == other {
		t.Fatal("WithOwner changed the original map")
	}
	// An unknown address gets a placeholder node; the text form has no id.
	q, ok := p.WithOwner(s, "", "10.99.0.1:7000", 16)
	if !ok || q.RouteSlot(s).Addr() != "10.99.0.1:7000" {
		t.Fatalf("placeholder route = %+v", q.RouteSlot(s))
	}

	// A delta older than the patch leaves the patched slot alone, even if it
	// names the slot...
	d11 := &slotdv1.MapDelta{FromVersion: 10, Version: 11, Slots: []*slotdv1.SlotOwner{{Slot: 100, Owner: a.OwnerID(s)}}}
	r, err := p.Apply(d11)
	if err != nil || r.OwnerID(s) != other || r.SlotVersion(s) != 15 {
		t.Fatalf("after older delta: owner %q slotVersion %d err %v", r.OwnerID(s), r.SlotVersion(s), err)
	}
	// ...and a delta at or past it takes over.
	d15 := &slotdv1.MapDelta{FromVersion: 11, Version: 15, Slots: []*slotdv1.SlotOwner{{Slot: 100, Owner: "store-002"}}}
	r, err = r.Apply(d15)
	if err != nil || r.OwnerID(s) != "store-002" || r.SlotVersion(s) != 15 {
		t.Fatalf("after newer delta: owner %q err %v", r.OwnerID(s), err)
	}

	// A full map older than the patch keeps it; the placeholder goes away
	// once no slot uses it.
	full12 := testMap(t, 12, nodes, 4)
	r = q.Replace(full12)
	if r.RouteSlot(s).Addr() != "10.99.0.1:7000" || r.Version() != 12 {
		t.Fatalf("older full map: route %+v", r.RouteSlot(s))
	}
	full20 := testMap(t, 20, nodes, 4)
	r = r.Replace(full20)
	if r != full20 || len(r.Nodes()) != 3 {
		t.Fatalf("newer full map must replace everything, nodes %d", len(r.Nodes()))
	}
}

func TestRouteMatchesSlotFunction(t *testing.T) {
	m := testMap(t, 7, testNodes(4), 5)
	for _, k := range []string{"", "a", "{user:42}:cart", "{user:42}:profile", "0123456789abcdef"} {
		r := m.RouteString(k)
		if r.Slot != slots.ForString(k) || r.Owner() != m.OwnerID(r.Slot) || r.Version != 7 {
			t.Fatalf("RouteString(%q) = %+v", k, r)
		}
		if m.Route([]byte(k)) != r {
			t.Fatalf("Route and RouteString differ for %q", k)
		}
	}
	key := []byte("0123456789abcdef")
	if n := testing.AllocsPerRun(100, func() { _ = m.Route(key) }); n != 0 {
		t.Fatalf("Route allocates %v times", n)
	}
}

// FuzzFromProto feeds arbitrary bytes to the decoder: it must never panic,
// and whatever it accepts must encode back to an equal map.
func FuzzFromProto(f *testing.F) {
	for _, n := range []int{1, 3, 17} {
		wire, _ := proto.Marshal(testMap(f, 5, testNodes(n), 1).Proto())
		f.Add(wire)
		wire, _ = proto.Marshal(replicatedMap(f, 9, testNodes(n), 3, true, 1).Proto())
		f.Add(wire)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, wire []byte) {
		var pb slotdv1.SlotMap
		if proto.Unmarshal(wire, &pb) != nil {
			return
		}
		m, err := FromProto(&pb)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		back, err := FromProto(m.Proto())
		if err != nil || !back.Equal(m) {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

// withOwners copies base's owners, applies changes, and builds a map at
// version over nodes.
func withOwners(t testing.TB, base *Map, version uint64, nodes []Node, changes map[int]string) *Map {
	t.Helper()
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = base.OwnerID(slots.MustNew(s))
		if o, ok := changes[s]; ok {
			owners[s] = o
		}
	}
	m, err := New(Snapshot{Version: version, ClusterID: base.ClusterID(), Nodes: nodes, Owners: owners})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDiffRandom diffs random pairs of maps whose node tables differ in
// every way a directory's can (nodes appended, removed, reordered,
// changed) and whose owners differ in a few slots or many: the delta
// names exactly the slots whose owner changed, and applying it gives the
// second map.
func TestDiffRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 300 {
		nodes := testNodes(2 + r.IntN(8))
		a := testMap(t, 10, nodes, uint64(i))
		next := slices.Clone(nodes)
		switch r.IntN(5) {
		case 0: // unchanged
		case 1:
			next = append(next, Node{ID: fmt.Sprintf("new-%d", i), Addr: "10.9.9.9:7500"})
		case 2:
			next = slices.Delete(next, 0, 1)
		case 3:
			r.Shuffle(len(next), func(x, y int) { next[x], next[y] = next[y], next[x] })
		case 4:
			next[r.IntN(len(next))].Addr = "10.8.8.8:7600"
		}
		owners := make([]string, slots.Count)
		moves := r.IntN(3) * r.IntN(200)
		for s := range owners {
			owners[s] = a.OwnerID(slots.MustNew(s))
			if !slices.ContainsFunc(next, func(n Node) bool { return n.ID == owners[s] }) || r.IntN(slots.Count) < moves {
				owners[s] = next[r.IntN(len(next))].ID
			}
		}
		b, err := New(Snapshot{Version: 11, ClusterID: "c1", Nodes: next, Owners: owners})
		if err != nil {
			t.Fatal(err)
		}
		d := Diff(a, b)
		var want []uint32
		for s := range slots.Count {
			if a.OwnerID(slots.MustNew(s)) != owners[s] {
				want = append(want, uint32(s))
			}
		}
		var got []uint32
		for _, so := range d.GetSlots() {
			got = append(got, so.GetSlot())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pair %d: delta names %d slots, want the %d whose owner changed", i, len(got), len(want))
		}
		if m, err := a.Apply(d); err != nil || !m.Equal(b) {
			t.Fatalf("pair %d: Apply(Diff(a, b)) = %v, equal %v; want b", i, err, err == nil && m.Equal(b))
		}
	}
}
