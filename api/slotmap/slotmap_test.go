package slotmap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
	"google.golang.org/protobuf/proto"
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
			wire, err := proto.Marshal(pb)
			if err != nil {
				t.Fatal(err)
			}
			// The contract: a full map fits in 40 KiB on the wire.
			if len(wire) > 40<<10 {
				t.Fatalf("%d nodes: full map is %d bytes on the wire, limit %d", tc.nodes, len(wire), 40<<10)
			}
			var back slotdv1.SlotMap
			if err := proto.Unmarshal(wire, &back); err != nil {
				t.Fatal(err)
			}
			got, err := FromProto(&back)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(m) {
				t.Fatal("decoded map differs from the original")
			}
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

func BenchmarkRoute16(b *testing.B) {
	m := testMap(b, 1, testNodes(16), 1)
	key := []byte("user:0123456789a") // 16 bytes
	b.ReportAllocs()
	var sink Route
	for b.Loop() {
		sink = m.Route(key)
	}
	_ = sink
}

func BenchmarkEncode(b *testing.B) {
	for _, n := range []int{3, 200} {
		m := testMap(b, 1, testNodes(n), 1)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				wire, err := proto.Marshal(m.Proto())
				if err != nil {
					b.Fatal(err)
				}
				size = len(wire)
			}
			b.ReportMetric(float64(size), "wire-bytes")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{3, 200} {
		wire, _ := proto.Marshal(testMap(b, 1, testNodes(n), 1).Proto())
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var pb slotdv1.SlotMap
				if err := proto.Unmarshal(wire, &pb); err != nil {
					b.Fatal(err)
				}
				if _, err := FromProto(&pb); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(wire)), "wire-bytes")
		})
	}
}

// BenchmarkApplyOneSlot is what every watcher pays per committed move.
func BenchmarkApplyOneSlot(b *testing.B) {
	for _, n := range []int{3, 200} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes := testNodes(n)
			a := testMap(b, 10, nodes, 1)
			d := Diff(a, withOwners(b, a, 11, nodes, map[int]string{5: nodes[0].ID}))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Apply(d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDiffOneSlot(b *testing.B) {
	nodes := testNodes(200)
	a := testMap(b, 10, nodes, 1)
	next := withOwners(b, a, 11, nodes, map[int]string{5: nodes[0].ID})
	b.ReportAllocs()
	for b.Loop() {
		Diff(a, next)
	}
}

// Maps derived from one map share its owner array and node table; no
// derivation may show through in another.
func TestDerivedMapsDoNotShareWrites(t *testing.T) {
	nodes := testNodes(3)
	a := testMap(t, 10, nodes, 6)
	before := a.Proto()
	s5, s6 := slots.MustNew(5), slots.MustNew(6)
	pick := func(not string) string {
		for _, n := range nodes {
			if n.ID != not {
				return n.ID
			}
		}
		return ""
	}
	to5, to6 := pick(a.OwnerID(s5)), pick(a.OwnerID(s6))
	b1, err := a.Apply(&slotdv1.MapDelta{FromVersion: 10, Version: 11, Slots: []*slotdv1.SlotOwner{{Slot: 5, Owner: to5}}})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := a.Apply(&slotdv1.MapDelta{FromVersion: 10, Version: 11, Slots: []*slotdv1.SlotOwner{{Slot: 6, Owner: to6}},
		Nodes: []*slotdv1.Node{{Id: "store-009", Address: "10.0.0.9:7500"}}})
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := a.WithOwner(s5, "", "10.1.1.1:1", 20)
	p2, _ := a.WithOwner(s5, "", "10.2.2.2:2", 20)
	if !proto.Equal(a.Proto(), before) {
		t.Fatal("deriving maps changed the original")
	}
	if b1.OwnerID(s5) != to5 || b1.OwnerID(s6) != a.OwnerID(s6) || len(b1.Nodes()) != 3 {
		t.Fatal("b1 wrong")
	}
	if b2.OwnerID(s6) != to6 || b2.OwnerID(s5) != a.OwnerID(s5) || len(b2.Nodes()) != 4 {
		t.Fatal("b2 wrong")
	}
	if p1.RouteSlot(s5).Addr() != "10.1.1.1:1" || p2.RouteSlot(s5).Addr() != "10.2.2.2:2" {
		t.Fatalf("patches share a node table: %s %s", p1.RouteSlot(s5).Addr(), p2.RouteSlot(s5).Addr())
	}
}

// TestOwnersBitLayout pins the packed layout documented on SlotMap in
// map.proto, which other languages implement: slot s at bit s*b, least
// significant bit first.
func TestOwnersBitLayout(t *testing.T) {
	nodes := testNodes(3) // 2 bits per slot
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = nodes[0].ID
	}
	owners[1], owners[2], owners[5], owners[16383] = nodes[1].ID, nodes[2].ID, nodes[1].ID, nodes[2].ID
	m, err := New(Snapshot{Version: 1, Nodes: nodes, Owners: owners})
	if err != nil {
		t.Fatal(err)
	}
	pb := m.Proto()
	if pb.OwnerBits != 2 || len(pb.Owners) != 4096 {
		t.Fatalf("bits %d, %d bytes", pb.OwnerBits, len(pb.Owners))
	}
	// Slots 0-3 are 0,1,2,0 -> 0b00_10_01_00; slots 4-7 are 0,1,0,0 -> 0b00_00_01_00;
	// slot 16383 is 2 in the top bits of the last byte.
	if pb.Owners[0] != 0x24 || pb.Owners[1] != 0x04 || pb.Owners[4095] != 0x80 {
		t.Fatalf("owners start % x, end %x", pb.Owners[:2], pb.Owners[4095])
	}
	for i := 2; i < 4095; i++ {
		if pb.Owners[i] != 0 {
			t.Fatalf("byte %d = %x, want 0", i, pb.Owners[i])
		}
	}
}

// TestRoutesFollowNodeTable: on every way a map is made, Route names the
// owner and address of the node table, never those of a map it was derived
// from (Route reads tables that seal makes and derived maps may share).
func TestRoutesFollowNodeTable(t *testing.T) {
	check := func(name string, m *Map) {
		t.Helper()
		for s := range slots.Count {
			r := m.RouteSlot(slots.MustNew(s))
			n := m.nodes[m.owners.get(s)]
			if !r.OK() || r.Owner() != n.ID || r.Addr() != n.Addr {
				t.Fatalf("%s: slot %d routes to %q at %q, table says %q at %q", name, s, r.Owner(), r.Addr(), n.ID, n.Addr)
			}
		}
	}
	nodes := testNodes(4)
	a := testMap(t, 10, nodes, 7)
	check("New", a)
	b, err := FromProto(a.Proto())
	if err != nil {
		t.Fatal(err)
	}
	check("FromProto", b)
	moved, err := a.Apply(&slotdv1.MapDelta{FromVersion: 10, Version: 11, Slots: []*slotdv1.SlotOwner{{Slot: 3, Owner: "store-001"}}})
	if err != nil {
		t.Fatal(err)
	}
	check("Apply, slot moved", moved)
	readdr, err := moved.Apply(&slotdv1.MapDelta{FromVersion: 11, Version: 12, Nodes: []*slotdv1.Node{{Id: "store-002", Address: "10.8.8.8:7600"}}})
	if err != nil {
		t.Fatal(err)
	}
	check("Apply, address changed", readdr)
	owned := readdr.SlotsOf("store-002")
	if got := readdr.RouteSlot(owned.Ranges()[0].From).Addr(); got != "10.8.8.8:7600" {
		t.Fatalf("after an address change the route says %q", got)
	}
	gone := map[int]string{}
	gone3 := readdr.SlotsOf("store-003")
	for s := range gone3.All() {
		gone[s.Int()] = "store-000"
	}
	removed, err := readdr.Apply(Diff(readdr, withOwners(t, readdr, 13, testNodes(3), gone)))
	if err != nil {
		t.Fatal(err)
	}
	check("Apply, node removed", removed)
	p, ok := removed.WithOwner(slots.MustNew(9), "", "10.99.0.1:7000", 20)
	if !ok {
		t.Fatal("WithOwner refused")
	}
	check("WithOwner, new address", p)
	q, _ := p.WithOwner(slots.MustNew(10), "store-001", nodes[1].Addr, 21)
	check("WithOwner, known node", q)
	r := q.Replace(testMap(t, 14, testNodes(3), 8))
	check("Replace keeping patches", r)
	check("the maps derived from stay intact", removed)
}

// BenchmarkApplyOneSlotCold applies one committed move to 1,000 maps in
// turn, as 1,000 watchers in one process do: each owner table copied is
// out of cache.
func BenchmarkApplyOneSlotCold(b *testing.B) {
	nodes := testNodes(3)
	ms := make([]*Map, 1000)
	var d *slotdv1.MapDelta
	for i := range ms {
		ms[i] = testMap(b, 10, nodes, 1)
		if d == nil {
			d = Diff(ms[i], withOwners(b, ms[i], 11, nodes, map[int]string{5: nodes[0].ID}))
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := ms[i%len(ms)].Apply(d); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// moveSeqs are sequences of one-slot moves, each the slot and the index of
// its new owner in testNodes(5): what TestMovesOverSharedTable and
// BenchmarkApplyMoves apply one delta at a time.
var moveSeqs = []struct {
	name  string
	moves func() [][2]int
}{
	// 300 slots in a row: the first 256 each take their own recent entry,
	// then slot 1256 finds 1000's taken and the table is copied.
	{"sequential", func() [][2]int {
		var mv [][2]int
		for i := range 300 {
			mv = append(mv, [2]int{1000 + i, i % 5})
		}
		return mv
	}},
	// One slot away and back to its first owner (the recent entry is freed
	// again), and slots that share an entry (s, s+256, s+512).
	{"back and colliding", func() [][2]int {
		return [][2]int{{5, 0}, {5, 1}, {5, 2}, {5, 3}, {5, 4}, {261, 0}, {261, 1}, {517, 2}, {5, 0}, {16383, 1}, {16383 - 256, 2}}
	}},
	{"random", func() [][2]int {
		r := rand.New(rand.NewPCG(7, 7))
		var mv [][2]int
		for range 400 {
			mv = append(mv, [2]int{r.IntN(slots.Count), r.IntN(5)})
		}
		return mv
	}},
}

// The maps of a chain of deltas share one owner array and keep their own
// recent changes over it: every map of the chain must keep answering with
// its own owners (checked against a plain array per version) through
// RouteSlot, OwnerID, SlotsOf, its wire form and Diff, however the recent
// entries were taken, freed and folded into a copy along the way.
func TestMovesOverSharedTable(t *testing.T) {
	nodes := testNodes(5)
	for _, seq := range moveSeqs {
		t.Run(seq.name, func(t *testing.T) {
			m := testMap(t, 10, nodes, 3)
			want := make([]string, slots.Count)
			for s := range want {
				want[s] = m.OwnerID(slots.MustNew(s))
			}
			type version struct {
				m     *Map
				owner []string
			}
			chain := []version{{m, slices.Clone(want)}}
			for i, mv := range seq.moves() {
				s, owner := mv[0], nodes[mv[1]].ID
				next, err := m.Apply(&slotdv1.MapDelta{FromVersion: m.Version(), Version: m.Version() + 1,
					Slots: []*slotdv1.SlotOwner{{Slot: uint32(s), Owner: owner}}})
				if err != nil {
					t.Fatalf("move %d: %v", i, err)
				}
				want[s] = owner
				chain = append(chain, version{next, slices.Clone(want)})
				m = next
			}
			for i, v := range chain {
				for s, id := range v.owner {
					sl := slots.MustNew(s)
					if got := v.m.RouteSlot(sl).Owner(); got != id || v.m.OwnerID(sl) != id {
						t.Fatalf("version %d slot %d: RouteSlot %q, OwnerID %q, want %q", i, s, got, v.m.OwnerID(sl), id)
					}
				}
				if set := v.m.SlotsOf(nodes[2].ID); set.Count() != countOf(v.owner, nodes[2].ID) {
					t.Fatalf("version %d: SlotsOf %d slots, want %d", i, set.Count(), countOf(v.owner, nodes[2].ID))
				}
				back, err := FromProto(v.m.Proto())
				if err != nil || !back.Equal(v.m) {
					t.Fatalf("version %d: wire round trip: %v", i, err)
				}
				if i > 0 {
					prev := chain[i-1].m
					fresh := withOwners(t, prev, prev.Version(), nodes, nil) // prev with a table of its own
					if got, err := fresh.Apply(Diff(prev, v.m)); err != nil || !got.Equal(v.m) {
						t.Fatalf("version %d: Apply(Diff(previous, this)) differs: %v", i, err)
					}
				}
			}
		})
	}
}

func countOf(owners []string, id string) int {
	n := 0
	for _, o := range owners {
		if o == id {
			n++
		}
	}
	return n
}

// BenchmarkApplyMoves applies each sequence of moveSeqs one delta at a
// time, each to the map the last one made, as a watcher does: B/op is what
// a watcher allocates per committed move (the recent changes copied with
// the Map, and the owner array's copies when an entry is taken).
func BenchmarkApplyMoves(b *testing.B) {
	nodes := testNodes(5)
	for _, seq := range moveSeqs {
		b.Run(seq.name, func(b *testing.B) {
			base := testMap(b, 10, nodes, 3)
			var ds []*slotdv1.MapDelta
			for i, mv := range seq.moves() {
				v := base.Version() + uint64(i)
				ds = append(ds, &slotdv1.MapDelta{FromVersion: v, Version: v + 1,
					Slots: []*slotdv1.SlotOwner{{Slot: uint32(mv[0]), Owner: nodes[mv[1]].ID}}})
			}
			b.ReportAllocs()
			applied := 0
			for b.Loop() {
				m := base
				for _, d := range ds {
					var err error
					if m, err = m.Apply(d); err != nil {
						b.Fatal(err)
					}
				}
				applied += len(ds)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(applied), "ns/move")
		})
	}
}

// TestOwnerIndexes: a snapshot by owner positions makes the map its owner
// ids make, and New refuses positions outside the node table.
func TestOwnerIndexes(t *testing.T) {
	nodes := testNodes(5)
	want := testMap(t, 7, nodes, 3)
	idx := make([]uint16, slots.Count)
	for s := range idx {
		idx[s] = uint16(want.index(want.RouteSlot(slots.MustNew(s)).Owner()))
	}
	got, err := New(Snapshot{Version: 7, ClusterID: "c1", Nodes: nodes, OwnerIndexes: idx})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.Proto(), want.Proto()) {
		t.Fatal("the map by owner indexes differs from the map by owner ids")
	}
	for _, tc := range []struct {
		name string
		idx  func() []uint16
	}{
		{"short", func() []uint16 { return idx[:slots.Count-1] }},
		{"past the node table", func() []uint16 { b := slices.Clone(idx); b[9] = uint16(len(nodes)); return b }},
		{"no position", func() []uint16 { b := slices.Clone(idx); b[slots.Count-1] = 0xffff; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(Snapshot{Version: 7, ClusterID: "c1", Nodes: nodes, OwnerIndexes: tc.idx()}); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

// BenchmarkApplyMoveInFlight is what every watcher pays for a version of a
// move in flight (its begin, its fence): the delta carries the migration.
func BenchmarkApplyMoveInFlight(b *testing.B) {
	nodes := testNodes(3)
	a := testMap(b, 10, nodes, 1)
	s := slots.MustNew(5)
	to := a.clone()
	to.version = 11
	to.migrations = []Migration{{Slot: s, From: a.OwnerID(s), To: nodes[2].ID, Phase: slotdv1.MovePhase_MOVE_PHASE_COPYING, MoveID: "m1"}}
	d := Diff(a, to.seal())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Apply(d); err != nil {
			b.Fatal(err)
		}
	}
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
