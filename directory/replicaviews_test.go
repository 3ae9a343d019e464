package directory

import (
	"reflect"
	"testing"

	"github.com/slotd/slotd/slots"
)

// viewState is a bootstrapped table for the views' tests: nodes n0.. at
// indexes 0.. with the given zones, every slot owned by n0 unless sets
// say otherwise, under policy rf and min_isr.
func viewState(zones []string, rf, minISR int, sets map[int]*replicaRec) *Snapshot {
	st := newState()
	st.policy = Replication{RF: rf, MinISR: minISR}
	for i, z := range zones {
		id := "n" + string(rune('0'+i))
		st.nodes[id] = &nodeRec{ID: id, Index: uint16(i), Zone: z, Weight: 1}
	}
	for i := range st.owners {
		st.owners[i] = 0
	}
	for s, r := range sets {
		st.owners[s] = r.isr[0]
		c := st.replicas[s/chunkSlots]
		if c == nil {
			c = new(replicaChunk)
			st.replicas[s/chunkSlots] = c
		}
		c[s%chunkSlots] = r
	}
	return st.snapshot()
}

// everySlot gives every slot the same set.
func everySlot(r *replicaRec) map[int]*replicaRec {
	out := make(map[int]*replicaRec, slots.Count)
	for s := range slots.Count {
		out[s] = r
	}
	return out
}

func TestReplicaSummary(t *testing.T) {
	three := everySlot(&replicaRec{isr: []uint16{0, 1, 2}})
	short := everySlot(&replicaRec{isr: []uint16{0, 1, 2}})
	short[7] = &replicaRec{epoch: 9, isr: []uint16{1, 2}, learners: []uint16{0}}
	short[8] = &replicaRec{epoch: 9, isr: []uint16{2}}
	cases := []struct {
		name   string
		zones  []string
		rf     int
		minISR int
		sets   map[int]*replicaRec
		want   ReplicaSummary
	}{
		{
			name: "rf 1: every slot its owner alone, no zones needed", zones: []string{"", "", ""}, rf: 1, minISR: 1,
			want: ReplicaSummary{ZoneSpread: []int{0, slots.Count},
				Nodes: map[string]NodeReplicas{"n0": {Primaries: slots.Count}, "n1": {}, "n2": {}}},
		},
		{
			name: "rf 3 in three zones", zones: []string{"a", "b", "c"}, rf: 3, minISR: 2, sets: three,
			want: ReplicaSummary{ZoneSpread: []int{0, 0, 0, slots.Count}, Nodes: map[string]NodeReplicas{
				"n0": {Primaries: slots.Count}, "n1": {Followers: slots.Count}, "n2": {Followers: slots.Count}}},
		},
		{
			name: "a shrunk ISR with its learner, and one below min_isr", zones: []string{"a", "b", "c"}, rf: 3, minISR: 2, sets: short,
			want: ReplicaSummary{
				ReplicaHealth: ReplicaHealth{UnderReplicated: 2, BelowMinISR: 1, WithLearners: 1},
				ZoneSpread:    []int{0, 1, 0, slots.Count - 1},
				Nodes: map[string]NodeReplicas{
					"n0": {Primaries: slots.Count - 2, Learners: 1},
					"n1": {Primaries: 1, Followers: slots.Count - 2},
					"n2": {Primaries: 1, Followers: slots.Count - 1}}},
		},
		{
			name: "two replicas in one zone", zones: []string{"a", "a", "c"}, rf: 3, minISR: 2, sets: three,
			want: ReplicaSummary{ZoneViolations: slots.Count, ZoneSpread: []int{0, 0, slots.Count}, Nodes: map[string]NodeReplicas{
				"n0": {Primaries: slots.Count}, "n1": {Followers: slots.Count}, "n2": {Followers: slots.Count}}},
		},
		{
			name: "a replica without a zone beside others", zones: []string{"a", "", "c"}, rf: 3, minISR: 2, sets: three,
			want: ReplicaSummary{ZoneViolations: slots.Count, ZoneSpread: []int{0, 0, 0, slots.Count}, Nodes: map[string]NodeReplicas{
				"n0": {Primaries: slots.Count}, "n1": {Followers: slots.Count}, "n2": {Followers: slots.Count}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := viewState(tc.zones, tc.rf, tc.minISR, tc.sets).ReplicaSummary()
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("summary\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestReplicaRanges(t *testing.T) {
	sets := everySlot(&replicaRec{isr: []uint16{0, 1, 2}})
	sets[100] = &replicaRec{epoch: 5, isr: []uint16{0, 1, 2}}        // another epoch, same replicas
	sets[200] = &replicaRec{epoch: 6, isr: []uint16{1, 2}}           // under-replicated
	sets[201] = &replicaRec{epoch: 6, isr: []uint16{1, 2}}           // the same run
	sets[202] = &replicaRec{isr: []uint16{2}, learners: []uint16{3}} // below min_isr, two in zone c
	got := viewState([]string{"a", "b", "c", "c"}, 3, 2, sets).ReplicaRanges()
	rg := func(from, to int, isr, learners, zones []string, under, below, bad bool) ReplicaRange {
		return ReplicaRange{From: slots.MustNew(from), To: slots.MustNew(to), ISR: isr, Learners: learners, Zones: zones,
			UnderReplicated: under, BelowMinISR: below, ZoneViolation: bad}
	}
	all := []string{"n0", "n1", "n2"}
	want := []ReplicaRange{
		rg(0, 199, all, nil, []string{"a", "b", "c"}, false, false, false),
		rg(200, 201, []string{"n1", "n2"}, nil, []string{"b", "c"}, true, false, false),
		rg(202, 202, []string{"n2"}, []string{"n3"}, []string{"c"}, true, true, true),
		rg(203, slots.Count-1, all, nil, []string{"a", "b", "c"}, false, false, false),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ranges\n got %+v\nwant %+v", got, want)
	}
	if n := want[0].Count(); n != 200 {
		t.Fatalf("Count of 0-199: %d", n)
	}
}

// BenchmarkReplicaSummary is the cost of one status read's pass over the
// sets at rf 3 (slotctl status and the console read it every second).
func BenchmarkReplicaSummary(b *testing.B) {
	snap := viewState([]string{"a", "b", "c"}, 3, 2, everySlot(&replicaRec{isr: []uint16{0, 1, 2}}))
	b.ReportAllocs()
	for b.Loop() {
		snap.ReplicaSummary()
	}
}

// BenchmarkReplicaRanges is the cost of one ListReplicaSets at rf 3 where
// every slot's set differs from its neighbour's (the worst case: 16,384
// ranges), as the bootstrap's ring walk nearly makes it.
func BenchmarkReplicaRanges(b *testing.B) {
	sets := make(map[int]*replicaRec, slots.Count)
	orders := [][]uint16{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}}
	for s := range slots.Count {
		sets[s] = &replicaRec{isr: orders[s%3]}
	}
	snap := viewState([]string{"a", "b", "c"}, 3, 2, sets)
	b.ReportAllocs()
	for b.Loop() {
		snap.ReplicaRanges()
	}
}
