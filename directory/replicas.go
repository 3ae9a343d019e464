package directory

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/slotd/slotd/slots"
)

// Replica sets (docs/replication.md, "Model" and "Directory (schema 3)").
// Every slot has a primary (its owner in owners/NN, so that routing reads
// one table as before), an in-sync set (ISR, the primary first) and
// learners being filled. A slot whose set is just its owner, at epoch 0,
// is implied and not stored: that is every slot at rf 1, so a schema-2
// directory reads as rf 1 with nothing rewritten.

// ReplicaSet is one slot's replicas at one version.
type ReplicaSet struct {
	Slot slots.Slot
	// Epoch is the version at which a replica step last changed the
	// slot's primary or ISR: the fencing token stores compare. 0 while no
	// step has since the slot's last owner change (its bootstrap or a
	// move's commit), whose version, which stores already hold as their
	// fence, is then the epoch: every slot at rf 1, and every slot
	// bootstrapped at rf > 1 until its first step.
	Epoch uint64
	// ISR holds the in-sync replicas, the primary first.
	ISR []string
	// Learners are replicas being filled, not yet in the ISR.
	Learners []string
}

// Primary returns the slot's primary (its owner).
func (r ReplicaSet) Primary() string {
	if len(r.ISR) == 0 {
		return ""
	}
	return r.ISR[0]
}

// Members returns every replica: the ISR, then the learners.
func (r ReplicaSet) Members() []string {
	return append(slices.Clip(r.ISR), r.Learners...)
}

// Has reports whether id holds a replica of the slot.
func (r ReplicaSet) Has(id string) bool {
	return slices.Contains(r.ISR, id) || slices.Contains(r.Learners, id)
}

// replicaRec is a stored set: node indexes, the primary first. A rec is
// never changed once made; an edit makes a new one.
type replicaRec struct {
	epoch    uint64
	isr      []uint16
	learners []uint16
}

func (r *replicaRec) members() []uint16 { return append(slices.Clip(r.isr), r.learners...) }

// replicaChunk holds the stored sets of one 256-slot chunk (nil: implied).
// Like a rec it is never changed once shared: states and snapshots share
// chunks, and an edit clones the chunk it changes (setReplicas).
type replicaChunk [chunkSlots]*replicaRec

// maxReplicaList bounds a decoded ISR or learner list.
const maxReplicaList = 2 * MaxRF

// encodeReplicas returns the stored form of chunk c, nil when it holds no
// set (the key is then deleted).
func encodeReplicas(c *replicaChunk) []byte {
	if c == nil {
		return nil
	}
	var b []byte
	for off, r := range c {
		if r == nil {
			continue
		}
		b = append(b, byte(off))
		b = binary.AppendUvarint(b, r.epoch)
		for _, list := range [][]uint16{r.isr, r.learners} {
			b = binary.AppendUvarint(b, uint64(len(list)))
			for _, idx := range list {
				b = binary.AppendUvarint(b, uint64(idx))
			}
		}
	}
	return b
}

var errReplicaChunk = errors.New("truncated or malformed")

// decodeReplicas parses a stored chunk; offsets must increase and every
// set needs a primary.
func decodeReplicas(b []byte) (*replicaChunk, error) {
	c := new(replicaChunk)
	next := 0
	uvarint := func() (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errReplicaChunk
		}
		b = b[n:]
		return v, nil
	}
	list := func() ([]uint16, error) {
		n, err := uvarint()
		if err != nil || n > maxReplicaList {
			return nil, errReplicaChunk
		}
		out := make([]uint16, n)
		for i := range out {
			v, err := uvarint()
			if err != nil || v >= maxNodes {
				return nil, errReplicaChunk
			}
			out[i] = uint16(v)
		}
		return out, nil
	}
	for len(b) > 0 {
		off := int(b[0])
		b = b[1:]
		if off < next {
			return nil, fmt.Errorf("slot offset %d out of order: %w", off, errReplicaChunk)
		}
		next = off + 1
		r := &replicaRec{}
		var err error
		if r.epoch, err = uvarint(); err != nil {
			return nil, err
		}
		if r.isr, err = list(); err != nil {
			return nil, err
		}
		if r.learners, err = list(); err != nil {
			return nil, err
		}
		if len(r.isr) == 0 {
			return nil, fmt.Errorf("slot offset %d has no primary: %w", off, errReplicaChunk)
		}
		c[off] = r
	}
	return c, nil
}

// replicasOf returns slot s's stored set, nil when it is implied.
func (st *state) replicasOf(s int) *replicaRec {
	if c := st.replicas[s/chunkSlots]; c != nil {
		return c[s%chunkSlots]
	}
	return nil
}

// setOf returns slot s's set, the implied one ({owner}, epoch 0) when
// none is stored.
func (st *state) setOf(s int) *replicaRec {
	if r := st.replicasOf(s); r != nil {
		return r
	}
	return &replicaRec{isr: []uint16{st.owners[s]}}
}

// setReplicas stores r as slot s's set (nil: implied again), cloning the
// chunk so that snapshots sharing it keep what they saw, and marks the
// chunk for the write.
func (st *state) setReplicas(m *mutation, s int, r *replicaRec) {
	i := s / chunkSlots
	c := new(replicaChunk)
	if old := st.replicas[i]; old != nil {
		*c = *old
	}
	c[s%chunkSlots] = r
	if *c == (replicaChunk{}) {
		c = nil
	}
	st.replicas[i] = c
	m.replicaChunks[i] = true
}

// replicaSlots counts the slots whose stored set holds node index idx, and
// of those the ones it is primary of.
func (st *state) replicaSlots(idx uint16) (member, primary int) {
	for _, c := range st.replicas {
		if c == nil {
			continue
		}
		for _, r := range c {
			if r != nil && slices.Contains(r.members(), idx) {
				member++
				if r.isr[0] == idx {
					primary++
				}
			}
		}
	}
	return member, primary
}

// withIDs returns r as slot s's ReplicaSet, naming each index with name.
func (r *replicaRec) withIDs(s int, name func(uint16) string) ReplicaSet {
	ids := func(list []uint16) []string {
		if len(list) == 0 {
			return nil
		}
		out := make([]string, len(list))
		for i, idx := range list {
			out[i] = name(idx)
		}
		return out
	}
	return ReplicaSet{Slot: slots.MustNew(s), Epoch: r.epoch, ISR: ids(r.isr), Learners: ids(r.learners)}
}

// nodeAt returns the id of the node at index idx ("" for none).
func (s *Snapshot) nodeAt(idx uint16) string {
	if p, ok := s.byIdx[idx]; ok {
		return s.Nodes[p].ID
	}
	return ""
}

// Replicas returns the replica set of sl at the snapshot's version.
func (s *Snapshot) Replicas(sl slots.Slot) ReplicaSet {
	n := sl.Int()
	if c := s.replicas[n/chunkSlots]; c != nil && c[n%chunkSlots] != nil {
		return c[n%chunkSlots].withIDs(n, s.nodeAt)
	}
	return (&replicaRec{isr: []uint16{s.owners[n]}}).withIDs(n, s.nodeAt)
}

// ReplicaSets returns the replica set of every slot, indexed by slot
// number.
func (s *Snapshot) ReplicaSets() []ReplicaSet {
	out := make([]ReplicaSet, slots.Count)
	for i := range out {
		out[i] = s.Replicas(slots.MustNew(i))
	}
	return out
}

// StoredReplicaSets returns how many slots have a stored set (the others
// are their owner alone, as at rf 1).
func (s *Snapshot) StoredReplicaSets() int { return countSets(&s.replicas) }

func (st *state) storedSets() int { return countSets(&st.replicas) }

func countSets(cs *[chunks]*replicaChunk) int {
	n := 0
	for _, c := range cs {
		if c == nil {
			continue
		}
		for _, r := range c {
			if r != nil {
				n++
			}
		}
	}
	return n
}

// sameChunk reports whether two chunks hold the same sets.
func sameChunk(a, b *replicaChunk) bool {
	if a == nil || b == nil {
		return a == b
	}
	for i := range a {
		x, y := a[i], b[i]
		if x == nil || y == nil {
			if x != y {
				return false
			}
			continue
		}
		if x.epoch != y.epoch || !slices.Equal(x.isr, y.isr) || !slices.Equal(x.learners, y.learners) {
			return false
		}
	}
	return true
}

// ReplicaHealth is how a snapshot's sets stand against its policy.
type ReplicaHealth struct {
	// UnderReplicated counts slots with fewer in-sync replicas than rf,
	// BelowMinISR those with fewer than min_isr.
	UnderReplicated, BelowMinISR int
	// WithLearners counts slots with replicas being filled.
	WithLearners int
}

// ReplicaHealth counts the slots whose sets fall short of the policy.
func (s *Snapshot) ReplicaHealth() ReplicaHealth {
	var h ReplicaHealth
	for i := range slots.Count {
		isr, learners := 1, 0 // an implied set: the owner alone
		if c := s.replicas[i/chunkSlots]; c != nil && c[i%chunkSlots] != nil {
			isr, learners = len(c[i%chunkSlots].isr), len(c[i%chunkSlots].learners)
		}
		if isr < s.Replication.RF {
			h.UnderReplicated++
		}
		if isr < s.Replication.MinISR {
			h.BelowMinISR++
		}
		if learners > 0 {
			h.WithLearners++
		}
	}
	return h
}

// EachStoredSet calls fn for every stored replica set, in slot order, with
// its members as positions in Nodes (NoPosition for an index that is no
// node's), the primary first in isr. The lists are fn's only for the
// call. It is ReplicaSets without a set per slot: slotd's watch hub turns
// every version into a map, and at rf 3 every slot's set is stored.
func (s *Snapshot) EachStoredSet(fn func(sl slots.Slot, epoch uint64, isr, learners []uint16)) {
	top := 0
	for _, idx := range s.idxOf {
		top = max(top, int(idx))
	}
	pos := make([]uint16, top+1)
	for i := range pos {
		pos[i] = NoPosition
	}
	for i, idx := range s.idxOf {
		pos[idx] = uint16(i)
	}
	var buf []uint16
	at := func(list []uint16) []uint16 {
		for _, idx := range list {
			p := uint16(NoPosition)
			if int(idx) < len(pos) {
				p = pos[idx]
			}
			buf = append(buf, p)
		}
		return buf[len(buf)-len(list):]
	}
	for c, ch := range s.replicas {
		if ch == nil {
			continue
		}
		for off, r := range ch {
			if r != nil {
				buf = buf[:0]
				isr := at(r.isr)
				fn(slots.MustNew(c*chunkSlots+off), r.epoch, isr, at(r.learners))
			}
		}
	}
}
