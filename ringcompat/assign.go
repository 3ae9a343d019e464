package ringcompat

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"

	"github.com/slotd/slotd/slots"
)

// SlotPosition returns the ring position InitialAssignment gives slot s:
// xxhash64 (seed 0) of s as 2 little-endian bytes.
func SlotPosition(s int) uint64 {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], uint16(s))
	return xxhash.Sum64(b[:])
}

// InitialAssignment returns the owner id of each of the slots.Count slots (index = slot number).
//
// The rule, which any implementation must follow to bootstrap the same table:
//
//  1. Build a ring with the XXHash point hash over nodes: node n gets
//     vnodes*n.Weight points, the i-th (0-based) at xxhash64(n.ID + "#" + i);
//     points sorted by (position, node id).
//  2. Slot s sits at SlotPosition(s) = xxhash64 of s as 2 little-endian bytes;
//     its ring owner is the node of the first point at or after that position,
//     wrapping past the top.
//  3. Cap: node n may hold at most ceil(slots.Count * n.Weight / W) slots,
//     W being the sum of weights. Slots are taken in increasing order; a slot
//     whose ring owner is full walks clockwise from its point to the first
//     point whose node still has room. The caps sum to at least slots.Count,
//     so every slot finds an owner.
//
// Zones do not affect the assignment. The result depends only on the node set
// and vnodes, never on the order of nodes. It returns ErrNoNodes for an empty
// list, ErrBadVNodes for vnodes <= 0, and the node errors of New (ErrBadNodeID
// for an empty id, ErrBadWeight, ErrDuplicateNode), all wrapped.
func InitialAssignment(nodes []Node, vnodes int) ([]string, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: the initial assignment needs at least one node", ErrNoNodes)
	}
	if vnodes <= 0 {
		return nil, fmt.Errorf("%w: got %d (try %d)", ErrBadVNodes, vnodes, DefaultVNodes)
	}
	r, err := New(Config{Hash: XXHash, VNodes: vnodes}, nodes...)
	if err != nil {
		return nil, err
	}

	var totalWeight int64
	for _, n := range r.nodes {
		totalWeight += int64(n.Weight)
	}
	caps := make([]int64, len(r.nodes))
	for i, n := range r.nodes {
		caps[i] = (slots.Count*int64(n.Weight) + totalWeight - 1) / totalWeight
	}

	counts := make([]int64, len(r.nodes))
	owners := make([]string, slots.Count)
	for s := range slots.Count {
		p := r.successor(SlotPosition(s))
		for counts[r.owners[p]] >= caps[r.owners[p]] {
			p = r.next(p)
		}
		n := r.owners[p]
		counts[n]++
		owners[s] = r.nodes[n].ID
	}
	return owners, nil
}
