package ringcompat

import (
	"errors"
	"fmt"

	"github.com/slotd/slotd/slots"
)

// MaxReplicas is the largest replication factor InitialReplicas takes.
const MaxReplicas = 5

// ErrBadReplicas: a replication factor below 1, above MaxReplicas, or above
// the number of zones (two replicas of a slot never share a zone).
var ErrBadReplicas = errors.New("ringcompat: bad replication factor")

// InitialReplicas returns the replica set of each of the slots.Count slots
// (index = slot number): rf distinct nodes in rf distinct zones, the
// primary first.
//
// The rule, which any implementation must follow to bootstrap the same sets
// (testdata/initial_replicas.tsv pins it):
//
//  1. The ring and slot positions are InitialAssignment's, and so are the
//     primaries: the first replica of slot s is InitialAssignment's owner of
//     s. At rf 1 the result is InitialAssignment.
//  2. Cap: node n may hold at most ceil(rf * slots.Count * n.Weight / W)
//     replicas in all (its primaries count), W being the sum of weights.
//  3. Slots are taken in increasing order, and each further replica in
//     turn: walking clockwise from the first point at or after
//     SlotPosition(s), wrapping past the top, the first node whose zone
//     holds no replica of the slot yet and whose count is below its cap;
//     if the whole ring has none, the first node whose zone holds none
//     (the zone rule is hard, the cap is not: a zone of one node holds a
//     replica of every slot when the zones are as many as rf).
//
// A node with an empty zone is a zone of its own (as Ring.Replicas
// walks: without zones it skips only nodes already chosen). Like InitialAssignment
// it depends only on the node set, vnodes and rf, never on the order of
// nodes. It returns InitialAssignment's errors, and ErrBadReplicas for rf
// below 1, above MaxReplicas or above the number of zones.
func InitialReplicas(nodes []Node, vnodes, rf int) ([][]string, error) {
	if rf < 1 || rf > MaxReplicas {
		return nil, fmt.Errorf("%w: rf %d is not in 1-%d", ErrBadReplicas, rf, MaxReplicas)
	}
	owners, err := InitialAssignment(nodes, vnodes)
	if err != nil {
		return nil, err
	}
	r, err := New(Config{Hash: XXHash, VNodes: vnodes}, nodes...)
	if err != nil {
		return nil, err
	}
	if rf > r.nzones {
		return nil, fmt.Errorf("%w: rf %d needs %d zones, the nodes are in %d", ErrBadReplicas, rf, rf, r.nzones)
	}
	index := make(map[string]uint32, len(r.nodes))
	var totalWeight int64
	for i, n := range r.nodes {
		index[n.ID] = uint32(i)
		totalWeight += int64(n.Weight)
	}
	caps := make([]int64, len(r.nodes))
	for i, n := range r.nodes {
		caps[i] = (int64(rf)*slots.Count*int64(n.Weight) + totalWeight - 1) / totalWeight
	}
	counts := make([]int64, len(r.nodes))
	for _, o := range owners {
		counts[index[o]]++
	}
	out := make([][]string, slots.Count)
	chosen := make([]uint32, 0, rf)
	for s := range slots.Count {
		chosen = append(chosen[:0], index[owners[s]])
		start := r.successor(SlotPosition(s))
		for len(chosen) < rf {
			c, ok := r.walkZone(chosen, start, func(c uint32) bool { return counts[c] < caps[c] })
			if !ok {
				c, ok = r.walkZone(chosen, start, func(uint32) bool { return true })
			}
			if !ok { // unreachable: rf <= zones
				return nil, fmt.Errorf("%w: slot %d found no zone for replica %d", ErrBadReplicas, s, len(chosen)+1)
			}
			chosen = append(chosen, c)
			counts[c]++
		}
		set := make([]string, len(chosen))
		for i, c := range chosen {
			set[i] = r.nodes[c].ID
		}
		out[s] = set
	}
	return out, nil
}

// walkZone walks the ring once from point start and returns the first node
// whose zone no node of chosen is in and that ok accepts.
func (r *Ring) walkZone(chosen []uint32, start int, ok func(uint32) bool) (uint32, bool) {
	p := start
	for range r.NumPoints() {
		if c := r.owners[p]; !r.zoneChosen(chosen, c) && ok(c) {
			return c, true
		}
		p = r.next(p)
	}
	return 0, false
}
