package slotmap

import (
	"slices"

	"github.com/slotd/slotd/slots"
)

// Replica sets are kept apart from the owner table, which Route reads
// alone: a map whose every slot is its owner alone (rf 1) has no replica
// table at all, and one at rf 3 adds about 4 KiB per 256 slots, none of
// it on Route's path.

const (
	// chunkSlots is how many slots a replicaChunk holds.
	chunkSlots = 256
	// replicaChunks is how many chunks cover every slot.
	replicaChunks = slots.Count / chunkSlots
	// MaxReplicaList bounds a slot's followers, and its learners, in a
	// map: the wire form holds both counts in one byte.
	MaxReplicaList = 15
)

// replicaRec is one slot's stored set as node indexes. Its primary is the
// slot's owner and is not held here: followers are the in-sync replicas
// after it.
type replicaRec struct {
	epoch     uint64
	followers []uint16
	learners  []uint16
}

// implied reports whether r says nothing the owner table does not: the
// owner alone, at epoch 0. Such a set is not stored.
func (r *replicaRec) implied() bool {
	return r.epoch == 0 && len(r.followers) == 0 && len(r.learners) == 0
}

// replicaChunk holds the stored sets of 256 slots without a pointer per
// slot (the collector scans one slice, not 256 records). It is never
// written once a table holds it: an edit builds a new chunk (with).
type replicaChunk struct {
	// members holds every stored set's followers then learners, slot after
	// slot: slot off's are members[start(off):end[off]], the first
	// nsync[off] of them followers.
	members []uint16
	// present has bit off set when slot off has a stored set.
	present [chunkSlots / 64]uint64
	end     [chunkSlots]uint16
	nsync   [chunkSlots]uint8
	epoch   [chunkSlots]uint64
}

func (c *replicaChunk) has(off int) bool { return c.present[off/64]&(1<<(off%64)) != 0 }

func (c *replicaChunk) start(off int) uint16 {
	if off == 0 {
		return 0
	}
	return c.end[off-1]
}

// rec returns slot off's stored set; its lists share c's memory (do not
// write them).
func (c *replicaChunk) rec(off int) (replicaRec, bool) {
	if !c.has(off) {
		return replicaRec{}, false
	}
	m := c.members[c.start(off):c.end[off]:c.end[off]]
	k := c.nsync[off]
	return replicaRec{epoch: c.epoch[off], followers: m[:k:k], learners: m[k:]}, true
}

// chunkBuilder makes a chunk from sets added in increasing slot order.
type chunkBuilder struct {
	c    *replicaChunk
	next int // the first offset not yet given an end
}

func (b *chunkBuilder) add(off int, r replicaRec) {
	if b.c == nil {
		b.c = new(replicaChunk)
	}
	c := b.c
	n := uint16(len(c.members))
	for ; b.next < off; b.next++ {
		c.end[b.next] = n
	}
	c.members = append(append(c.members, r.followers...), r.learners...)
	c.present[off/64] |= 1 << (off % 64)
	c.epoch[off] = r.epoch
	c.nsync[off] = uint8(len(r.followers))
	c.end[off] = uint16(len(c.members))
	b.next = off + 1
}

// done returns the chunk, nil when no set was added.
func (b *chunkBuilder) done() *replicaChunk {
	if b.c == nil {
		return nil
	}
	n := uint16(len(b.c.members))
	for ; b.next < chunkSlots; b.next++ {
		b.c.end[b.next] = n
	}
	return b.c
}

// replicaTable holds a map's stored replica sets: chunks[i] covers slots
// i*256 to i*256+255, nil when none of them has a stored set. A table is
// shared between the maps derived from one another and never written once
// a map holds it: an edit copies the table (64 pointers) and builds the
// chunks it changes.
type replicaTable struct {
	chunks [replicaChunks]*replicaChunk
}

// get returns slot s's stored set.
func (t *replicaTable) get(s int) (replicaRec, bool) {
	if t == nil {
		return replicaRec{}, false
	}
	c := t.chunks[s/chunkSlots]
	if c == nil {
		return replicaRec{}, false
	}
	return c.rec(s % chunkSlots)
}

// each calls fn for every stored set in slot order.
func (t *replicaTable) each(fn func(s int, r replicaRec)) {
	if t == nil {
		return
	}
	for i, c := range t.chunks {
		if c == nil {
			continue
		}
		for off := range chunkSlots {
			if r, ok := c.rec(off); ok {
				fn(i*chunkSlots+off, r)
			}
		}
	}
}

// empty reports whether t stores no set.
func (t *replicaTable) empty() bool {
	if t == nil {
		return true
	}
	for _, c := range t.chunks {
		if c != nil {
			return false
		}
	}
	return true
}

// tableBuilder makes a table from sets added in increasing slot order.
type tableBuilder struct {
	t   replicaTable
	b   chunkBuilder
	cur int // the chunk b builds, -1 for none
}

func newTableBuilder() *tableBuilder { return &tableBuilder{cur: -1} }

// add adds slot s's set (an implied one adds nothing); r's lists are
// copied.
func (tb *tableBuilder) add(s int, r replicaRec) {
	if i := s / chunkSlots; i != tb.cur {
		if tb.cur >= 0 {
			tb.t.chunks[tb.cur] = tb.b.done()
		}
		tb.b, tb.cur = chunkBuilder{}, i
	}
	if !r.implied() {
		tb.b.add(s%chunkSlots, r)
	}
}

// done returns the table, nil when no set is stored.
func (tb *tableBuilder) done() *replicaTable {
	if tb.cur >= 0 {
		tb.t.chunks[tb.cur] = tb.b.done()
	}
	if tb.t.empty() {
		return nil
	}
	return &tb.t
}

// buildTable makes a table from sets given in increasing slot order by
// next, which returns false when there are no more; nil when none is
// stored.
func buildTable(next func() (int, replicaRec, bool)) *replicaTable {
	tb := newTableBuilder()
	for s, r, ok := next(); ok; s, r, ok = next() {
		tb.add(s, r)
	}
	return tb.done()
}

// with returns t with the given slots' sets replaced (an implied set
// removes the slot's); edits is sorted by slot, one per slot. t is not
// changed; chunks no edit touches are shared.
func (t *replicaTable) with(edits []replicaEdit) *replicaTable {
	if len(edits) == 0 {
		return t
	}
	c := new(replicaTable)
	if t != nil {
		*c = *t
	}
	for len(edits) > 0 {
		i := edits[0].slot / chunkSlots
		n := 1
		for n < len(edits) && edits[n].slot/chunkSlots == i {
			n++
		}
		c.chunks[i] = rebuildChunk(c.chunks[i], i, edits[:n])
		edits = edits[n:]
	}
	if c.empty() {
		return nil
	}
	return c
}

// replicaEdit is a new set for one slot.
type replicaEdit struct {
	slot int
	rec  replicaRec
}

// rebuildChunk returns chunk i (old, possibly nil) with edits applied.
func rebuildChunk(old *replicaChunk, i int, edits []replicaEdit) *replicaChunk {
	var b chunkBuilder
	for off := range chunkSlots {
		r, ok := replicaRec{}, false
		if len(edits) > 0 && edits[0].slot == i*chunkSlots+off {
			r, ok = edits[0].rec, !edits[0].rec.implied()
			edits = edits[1:]
		} else if old != nil {
			r, ok = old.rec(off)
		}
		if ok {
			b.add(off, r)
		}
	}
	return b.done()
}

// remap returns t with every member's node index i replaced by to[i]; a
// member whose to[i] is negative is dropped, and its slot is added to
// lost. It is for a node table that shrank (a node removed, a placeholder
// dropped).
func (t *replicaTable) remap(to []int, lost *slots.Set) *replicaTable {
	if t == nil {
		return nil
	}
	tr := func(list []uint16, s int) []uint16 {
		out := make([]uint16, 0, len(list))
		for _, idx := range list {
			if j := to[idx]; j >= 0 {
				out = append(out, uint16(j))
			} else {
				lost.Add(slots.MustNew(s))
			}
		}
		return out
	}
	var sets []replicaEdit
	t.each(func(s int, r replicaRec) {
		sets = append(sets, replicaEdit{slot: s, rec: replicaRec{epoch: r.epoch, followers: tr(r.followers, s), learners: tr(r.learners, s)}})
	})
	return buildTable(func() (int, replicaRec, bool) {
		if len(sets) == 0 {
			return 0, replicaRec{}, false
		}
		e := sets[0]
		sets = sets[1:]
		return e.slot, e.rec, true
	})
}

// sameChunk reports whether two chunks hold the same sets by the same
// indexes: a builder lays out equal sets identically.
func sameChunk(a, b *replicaChunk) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.present == b.present && a.end == b.end && a.nsync == b.nsync && a.epoch == b.epoch && slices.Equal(a.members, b.members)
}
