package slotmap

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

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
