package slotmap

import (
	"math/bits"
	"slices"

	"github.com/slotd/slotd/slots"
)

// ownerBits is the width of one packed owner index for n nodes.
func ownerBits(n int) int {
	if n <= 2 {
		return 1
	}
	return bits.Len(uint(n - 1))
}

// placeholderPrefix marks node table entries made up from a redirect for an
// address the table did not know; the next full map or delta replaces them.
const placeholderPrefix = "redirect:"

func isPlaceholder(id string) bool {
	return len(id) > len(placeholderPrefix) && id[:len(placeholderPrefix)] == placeholderPrefix
}

// ownerTable holds the owner index of every slot: a flat array t, shared
// between maps derived from one another, and a small table of the slots a
// derived map changed over t (recentSlot, held in the Map, and their
// owners r, shared until a derived map changes a slot). A delta that moves
// a few slots copies the Map, 256 bytes of recent slots in it, and the
// 256 bytes of their owners instead of the 32 KiB array; a delta that
// moves none (a move begins or is fenced) copies the Map alone. With a
// thousand watchers in one process, copying the array per watcher per
// commit was 78% of all bytes allocated and what made the collections;
// then a Map with 1 KiB of recent changes in it was half of what a client
// allocated per change (grpcapi BenchmarkPropagation1000, alloc-MB/move).
// The array is copied, the recent changes folded into it, only when a
// change finds its place (s%recentLen) taken by another slot, or when a
// writer sets every slot (own).
//
// Route reads t[s] and recentSlot[s%recentLen] side by side (both
// addresses depend on the slot alone; the Map's fields load while the hash
// is computed) and takes the owner from r only when the slot is there: a
// branch that is almost never taken, so the owner waits on one load after
// the hash, as with the flat array alone. (In BenchmarkRouteVsFloor, a
// table split into chunks behind pointers waits on two loads in a row, a
// conditional move waits on the compare, and the recent slots behind a
// pointer as well cost a nil check and a load: each costs Route more.)
//
// Once a map is published its table is never written; set is only called
// on a map being built.
type ownerTable struct {
	t *[slots.Count]uint16
	// r[k] is slot recentSlot[k]'s owner, overriding t. It is never nil
	// when an entry is in use.
	r *[recentLen]uint16
	// mine is true when t belongs to this table alone and may be written
	// in place; every recent entry is then free. rMine is true when r
	// belongs to this table alone.
	mine, rMine bool
	// n is how many recent entries are in use (at most recentLen). A
	// uint16 beside the two bools keeps the Map at 448 bytes, one of the
	// allocator's size classes: 8 bytes more put it in the 480-byte class,
	// 32 bytes more per version for every watcher (api/slotmap
	// BenchmarkApplyOneSlot, B/op).
	n uint16
	// recentSlot[k] is the one slot s with s%recentLen == k that a derived
	// map changed; a free entry's slot is free, which is no slot. Every
	// table with an array has its entries set (own); a table without one
	// has no owners. Last: it holds no pointers, and the collector scans a
	// Map only up to its last pointer.
	recentSlot [recentLen]uint16
}

const (
	recentLen = 128
	free      = 0xffff
)

// at returns the owner of slot s. Neither index is bounds-checked and it
// inlines into RouteSlot.
func (t *ownerTable) at(s uint) uint16 {
	s &= slots.Count - 1
	o := t.t[s]
	if k := s % recentLen; t.recentSlot[k] == uint16(s) {
		o = t.r[k]
	}
	return o
}

func (t *ownerTable) get(s int) uint16 { return t.at(uint(s)) }

func (t *ownerTable) set(s int, o uint16) {
	if t.mine {
		t.t[s] = o
		return
	}
	if t.t == nil {
		t.own()[s] = o
		return
	}
	k := s % recentLen
	switch rs := t.recentSlot[k]; {
	case rs != free && rs != uint16(s):
		t.own()[s] = o // another slot holds the place
	case t.t[s] == o:
		if rs != free {
			t.recentSlot[k] = free
			t.n--
		}
	default:
		if rs == free {
			t.n++
		}
		if !t.rMine {
			r := new([recentLen]uint16)
			if t.r != nil {
				*r = *t.r
			}
			t.r, t.rMine = r, true
		}
		t.recentSlot[k], t.r[k] = uint16(s), o
	}
}

// own gives t an array of its own with the recent changes folded into it
// (zero if it had none) and returns it: for a map being built that is
// about to set slots in place.
func (t *ownerTable) own() *[slots.Count]uint16 {
	if t.mine {
		return t.t
	}
	var flat *[slots.Count]uint16
	if t.t != nil {
		// A clone is not zeroed first (new would be).
		flat = (*[slots.Count]uint16)(slices.Clone(t.t[:]))
		for k, rs := range t.recentSlot {
			if rs != free {
				flat[rs&(slots.Count-1)] = t.r[k]
			}
		}
	} else {
		flat = new([slots.Count]uint16)
	}
	for k := range t.recentSlot {
		t.recentSlot[k] = free
	}
	t.t, t.r, t.mine, t.rMine, t.n = flat, nil, true, false, 0
	return flat
}

// flat returns every slot's owner in one array: t itself when no recent
// entry is in use (do not write it), else a copy with them folded in.
func (t *ownerTable) flat() *[slots.Count]uint16 {
	if t.n == 0 {
		return t.t
	}
	c := *t
	return c.own()
}
