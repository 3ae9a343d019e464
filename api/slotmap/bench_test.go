package slotmap

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

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
