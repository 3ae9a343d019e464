package slotmap

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/slotd/slotd/api/slotdv1"
	"github.com/slotd/slotd/slots"
)

// encodeReplicas returns the wire form of t (slotdv1.SlotMap's replicas;
// the layout is described beside the message): nil for no table, so that a
// map at rf 1 encodes as it did before replica sets.
func encodeReplicas(t *replicaTable) []byte {
	var b []byte
	next := 0
	t.each(func(s int, r replicaRec) {
		b = binary.AppendUvarint(b, uint64(s-next))
		b = binary.AppendUvarint(b, r.epoch)
		b = binary.AppendUvarint(b, uint64(len(r.followers)*(MaxReplicaList+1)+len(r.learners)))
		for _, idx := range r.followers {
			b = binary.AppendUvarint(b, uint64(idx))
		}
		for _, idx := range r.learners {
			b = binary.AppendUvarint(b, uint64(idx))
		}
		next = s + 1
	})
	return b
}

// decodeReplicas sets m's table from its wire form, once m's nodes and
// owners are set.
func (m *Map) decodeReplicas(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if !m.assigned {
		return fmt.Errorf("%w: replica sets without owners", ErrInvalid)
	}
	// One backing array for every list: a map at rf 3 has 16,384 sets.
	var pool []uint16
	next := 0
	var bad error
	uvarint := func(what string, limit uint64) uint64 {
		v, n := binary.Uvarint(b)
		switch {
		case bad != nil:
			return 0
		case n <= 0:
			bad = fmt.Errorf("%w: replicas: %s after slot %d is truncated", ErrInvalid, what, next)
			return 0
		case v > limit:
			bad = fmt.Errorf("%w: replicas: %s %d after slot %d is over %d", ErrInvalid, what, v, next, limit)
			return 0
		}
		b = b[n:]
		return v
	}
	t := buildTable(func() (int, replicaRec, bool) {
		if len(b) == 0 || bad != nil {
			return 0, replicaRec{}, false
		}
		s := next + int(uvarint("slot gap", slots.Count-1))
		if bad == nil && s >= slots.Count {
			bad = fmt.Errorf("%w: replicas: slot %d is out of range", ErrInvalid, s)
		}
		r := replicaRec{epoch: uvarint("epoch", 1<<64-1)}
		counts := int(uvarint("replica counts", (MaxReplicaList+1)*(MaxReplicaList+1)-1))
		nf, nl := counts/(MaxReplicaList+1), counts%(MaxReplicaList+1)
		if bad != nil {
			return 0, replicaRec{}, false
		}
		if len(pool) < nf+nl {
			pool = make([]uint16, max(nf+nl, 4096))
		}
		list := pool[: nf+nl : nf+nl]
		pool = pool[nf+nl:]
		for i := range list {
			list[i] = uint16(uvarint("node index", uint64(len(m.nodes)-1)))
		}
		r.followers, r.learners = list[:nf:nf], list[nf:]
		if bad == nil && r.implied() {
			bad = fmt.Errorf("%w: replicas: slot %d: a record that says nothing", ErrInvalid, s)
		}
		if bad == nil {
			bad = m.checkRec(s, r)
		}
		if bad != nil {
			return 0, replicaRec{}, false
		}
		next = s + 1
		return s, r, true
	})
	if bad != nil {
		return bad
	}
	m.replicas = t
	return nil
}

// diffReplicas appends to d the slots whose set differs between from and
// to. kept says every node of from is at its own index in to; then chunks
// the two tables share are skipped unread.
func diffReplicas(d *slotdv1.MapDelta, from, to *Map, kept bool) {
	if from.replicas == nil && to.replicas == nil {
		return
	}
	for i := range replicaChunks {
		var fc, tc *replicaChunk
		if from.replicas != nil {
			fc = from.replicas.chunks[i]
		}
		if to.replicas != nil {
			tc = to.replicas.chunks[i]
		}
		if kept && (fc == tc || sameChunk(fc, tc)) {
			continue
		}
		for s := i * chunkSlots; s < (i+1)*chunkSlots; s++ {
			if !sameReplicas(from, to, s) {
				d.Replicas = append(d.Replicas, to.replicasProto(s))
			}
		}
	}
}

// replicasProto returns slot s's set in a delta, by node id.
func (m *Map) replicasProto(s int) *slotdv1.SlotReplicas {
	out := &slotdv1.SlotReplicas{Slot: uint32(s)}
	r, ok := m.replicas.get(s)
	if !ok {
		return out
	}
	out.Epoch = r.epoch
	out.Followers = m.idsOf(r.followers)
	out.Learners = m.idsOf(r.learners)
	return out
}

func (m *Map) idsOf(list []uint16) []string {
	if len(list) == 0 {
		return nil
	}
	out := make([]string, len(list))
	for i, idx := range list {
		out[i] = m.nodes[idx].ID
	}
	return out
}

// applyReplicas sets the sets a delta carries on c, the map being built
// by Apply once its node table and owners are final. lost holds the slots
// whose set lost a member with a removed node: the delta must give each a
// new set.
func (c *Map) applyReplicas(rs []*slotdv1.SlotReplicas, lost *slots.Set, idx func(id string) (uint16, bool)) error {
	if len(rs) == 0 && lost.Count() == 0 {
		return nil
	}
	if !c.assigned && len(rs) > 0 {
		return fmt.Errorf("%w: replica sets without owners", ErrInvalid)
	}
	edits := make([]replicaEdit, 0, len(rs))
	ids := func(s int, list []string) ([]uint16, error) {
		if len(list) == 0 {
			return nil, nil
		}
		out := make([]uint16, len(list))
		for i, id := range list {
			j, ok := idx(id)
			if !ok {
				return nil, fmt.Errorf("%w: slot %d: replica %q is not in the node table", ErrInvalid, s, id)
			}
			out[i] = j
		}
		return out, nil
	}
	for _, p := range rs {
		sl, err := slots.New(int(p.GetSlot()))
		if err != nil {
			return fmt.Errorf("%w: replicas: %v", ErrInvalid, err)
		}
		s := sl.Int()
		r := replicaRec{epoch: p.GetEpoch()}
		if r.followers, err = ids(s, p.GetFollowers()); err != nil {
			return err
		}
		if r.learners, err = ids(s, p.GetLearners()); err != nil {
			return err
		}
		// A redirect's owner may be among the set's members: the set is
		// checked against the owner the delta gives, which the patch hides.
		if !c.patched(sl) {
			if err := c.checkRec(s, r); err != nil {
				return err
			}
		}
		edits = append(edits, replicaEdit{slot: s, rec: r})
	}
	slices.SortStableFunc(edits, func(a, b replicaEdit) int { return a.slot - b.slot })
	for i := 1; i < len(edits); i++ {
		if edits[i].slot == edits[i-1].slot {
			return fmt.Errorf("%w: slot %d has two replica sets in one delta", ErrInvalid, edits[i].slot)
		}
	}
	for s := range lost.All() {
		if _, ok := slices.BinarySearchFunc(edits, s.Int(), func(e replicaEdit, s int) int { return e.slot - s }); !ok {
			return fmt.Errorf("%w: slot %d: a replica's node is removed and the delta gives the slot no new set", ErrInvalid, s.Int())
		}
	}
	c.replicas = c.replicas.with(edits)
	return nil
}
