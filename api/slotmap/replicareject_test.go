package slotmap

import (
	"encoding/binary"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// TestReplicasRejected: malformed sets in a full map, a delta or a
// snapshot are ErrInvalid.
func TestReplicasRejected(t *testing.T) {
	nodes := testNodes(4)
	good := replicatedMap(t, 20, nodes, 2, true, 5)
	gp := good.Proto()
	owner := func(s int) uint64 { return uint64(good.owners.get(s)) }
	other := func(s int) uint64 { return (owner(s) + 1) % 4 }
	rec := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	wire := []struct {
		name     string
		replicas []byte
		noOwners bool
	}{
		{"truncated", gp.GetReplicas()[:len(gp.GetReplicas())-1], false},
		{"slot out of range", rec(slots.Count, 1, 16), false},
		{"index past the table", rec(0, 1, 16, 4), false},
		{"names the owner", rec(0, 1, 16, owner(0)), false},
		{"a node twice", rec(0, 1, 17, other(0), other(0)), false},
		{"a record that says nothing", rec(0, 0, 0), false},
		{"counts past the limit", rec(0, 1, (MaxReplicaList+1)*(MaxReplicaList+1)), false},
		{"without owners", rec(0, 1, 16, other(0)), true},
	}
	for _, tc := range wire {
		t.Run("wire/"+tc.name, func(t *testing.T) {
			pb := proto.Clone(gp).(*slotdv1.SlotMap)
			pb.Replicas = tc.replicas
			if tc.noOwners {
				pb.Owners, pb.OwnerBits = nil, 0
			}
			if _, err := FromProto(pb); !errors.Is(err, ErrInvalid) {
				t.Fatalf("FromProto error = %v, want ErrInvalid", err)
			}
		})
	}
	o0 := good.OwnerID(slots.MustNew(0))
	deltas := []struct {
		name string
		d    *slotdv1.MapDelta
	}{
		{"unknown node", &slotdv1.MapDelta{Replicas: []*slotdv1.SlotReplicas{{Slot: 0, Epoch: 21, Followers: []string{"nope"}}}}},
		{"owner as follower", &slotdv1.MapDelta{Replicas: []*slotdv1.SlotReplicas{{Slot: 0, Epoch: 21, Followers: []string{o0}}}}},
		{"slot out of range", &slotdv1.MapDelta{Replicas: []*slotdv1.SlotReplicas{{Slot: slots.Count, Epoch: 21}}}},
		{"one slot twice", &slotdv1.MapDelta{Replicas: []*slotdv1.SlotReplicas{{Slot: 0, Epoch: 21}, {Slot: 0, Epoch: 22}}}},
		{"a follower made owner, its set unchanged", &slotdv1.MapDelta{Slots: []*slotdv1.SlotOwner{{Slot: 0, Owner: good.ReplicaSet(slots.MustNew(0)).ISR[1]}}}},
	}
	for _, tc := range deltas {
		t.Run("delta/"+tc.name, func(t *testing.T) {
			tc.d.FromVersion, tc.d.Version = 20, 21
			if _, err := good.Apply(tc.d); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Apply error = %v, want ErrInvalid", err)
			}
		})
	}
	snaps := []struct {
		name string
		rs   ReplicaSet
	}{
		{"primary is not the owner", ReplicaSet{Slot: slots.MustNew(0), ISR: []string{good.ReplicaSet(slots.MustNew(0)).ISR[1]}}},
		{"no primary", ReplicaSet{Slot: slots.MustNew(0), Epoch: 3}},
		{"unknown learner", ReplicaSet{Slot: slots.MustNew(0), ISR: []string{o0}, Learners: []string{"nope"}}},
	}
	for _, tc := range snaps {
		t.Run("snapshot/"+tc.name, func(t *testing.T) {
			if _, err := New(Snapshot{Version: 1, Nodes: nodes, Owners: ownersOf(good), Replicas: []ReplicaSet{tc.rs}}); !errors.Is(err, ErrInvalid) {
				t.Fatalf("New error = %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := New(Snapshot{Version: 1, Nodes: nodes, Replicas: good.ReplicaSets()[:1]}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("sets without owners: %v, want ErrInvalid", err)
	}
}

// TestEachReplicaSetRejected: sets given by position must come in slot
// order, led by the slot's owner, naming nodes of the table.
func TestEachReplicaSetRejected(t *testing.T) {
	nodes := testNodes(3)
	owners := make([]string, slots.Count)
	for s := range owners {
		owners[s] = nodes[s%3].ID
	}
	type set struct {
		slot          int
		isr, learners []uint16
	}
	tests := []struct {
		name string
		sets []set
		ok   bool
	}{
		{"in order, led by the owner", []set{{0, []uint16{0, 1}, nil}, {1, []uint16{1}, []uint16{2}}}, true},
		{"out of order", []set{{1, []uint16{1, 0}, nil}, {0, []uint16{0, 1}, nil}}, false},
		{"led by another node", []set{{0, []uint16{1, 0}, nil}}, false},
		{"no primary", []set{{0, nil, []uint16{1}}}, false},
		{"a position past the table", []set{{0, []uint16{0, 3}, nil}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Snapshot{Version: 2, Nodes: nodes, Owners: owners, EachReplicaSet: func(fn func(slots.Slot, uint64, []uint16, []uint16)) {
				for _, s := range tc.sets {
					fn(slots.MustNew(s.slot), 2, s.isr, s.learners)
				}
			}})
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("New = %v, want ok %v", err, tc.ok)
			}
			if tc.ok {
				if got := m.ReplicaSet(slots.MustNew(1)); got.Epoch != 2 || len(got.ISR) != 1 || len(got.Learners) != 1 || got.Learners[0] != nodes[2].ID {
					t.Fatalf("slot 1: %+v", got)
				}
			}
		})
	}
}
